package importer

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// maxMember bounds the uncompressed size of one .npz member (8 GiB), so a
// zip bomb fails cleanly.
const maxMember = 8 << 30

// decodeNPZ decodes every .npy member of a .npz archive (np.savez or
// np.savez_compressed), in archive order. Member names lose their ".npy"
// suffix, as numpy.load shows them.
func decodeNPZ(b []byte) ([]*Tensor, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("not a .npz (zip) archive: %v", err)
	}
	var out []*Tensor
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		name := strings.TrimSuffix(f.Name, ".npy")
		if f.UncompressedSize64 > maxMember {
			return nil, fmt.Errorf("tensor %q: member of %d bytes is too large", name, f.UncompressedSize64)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxMember+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		t, err := decodeNPY(name, data)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %v", name, err)
		}
		out = append(out, t)
	}
	return out, nil
}
