package importer

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// decodeNPY decodes one .npy file (format versions 1.0, 2.0 and 3.0).
func decodeNPY(name string, b []byte) (*Tensor, error) {
	if len(b) < 10 || string(b[:6]) != npyMagic {
		return nil, fmt.Errorf("not a .npy file (no \\x93NUMPY magic)")
	}
	major := b[6]
	var hlen, off int
	switch major {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:10])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf(".npy header truncated")
		}
		h := binary.LittleEndian.Uint32(b[8:12])
		if h > uint32(len(b)) {
			return nil, fmt.Errorf(".npy header length %d exceeds the file", h)
		}
		hlen, off = int(h), 12
	default:
		return nil, fmt.Errorf(".npy format version %d.%d unsupported (want 1.0, 2.0 or 3.0)", major, b[7])
	}
	if off+hlen > len(b) {
		return nil, fmt.Errorf(".npy header length %d exceeds the file", hlen)
	}
	hdr, err := parsePyDict(string(b[off : off+hlen]))
	if err != nil {
		return nil, fmt.Errorf(".npy header: %v", err)
	}
	descr, ok := hdr["descr"].(string)
	if !ok {
		return nil, fmt.Errorf(".npy header: 'descr' missing or not a simple dtype string (structured arrays are not supported)")
	}
	fortran, ok := hdr["fortran_order"].(bool)
	if !ok {
		return nil, fmt.Errorf(".npy header: 'fortran_order' missing or not True/False")
	}
	shape, ok := hdr["shape"].([]int)
	if !ok {
		return nil, fmt.Errorf(".npy header: 'shape' missing or not a tuple of integers")
	}
	et, err := npyDtype(descr)
	if err != nil {
		return nil, err
	}
	return decodeData(name, shape, et, fortran, b[off+hlen:])
}

// npyDtype parses a NumPy array-protocol type string such as "<i8", ">u4",
// "|u1" or "<f4".
func npyDtype(s string) (elemType, error) {
	bad := func() (elemType, error) {
		return elemType{}, fmt.Errorf("dtype %q unsupported (want signed or unsigned integers of 1-8 bytes, or float16/32/64)", s)
	}
	if len(s) != 3 {
		return bad()
	}
	et := elemType{kind: s[1]}
	switch s[2] {
	case '1', '2', '4', '8':
		et.size = int(s[2] - '0')
	default:
		return bad()
	}
	switch et.kind {
	case 'i', 'u':
	case 'f':
		if et.size == 1 {
			return bad()
		}
	default:
		return bad()
	}
	switch s[0] {
	case '<', '=': // '=' is native; NumPy writes '<' or '>' in files
		et.order = binary.LittleEndian
	case '>':
		et.order = binary.BigEndian
	case '|':
		if et.size != 1 {
			return bad()
		}
		et.order = binary.LittleEndian
	default:
		return bad()
	}
	return et, nil
}

// parsePyDict parses the Python dict literal of a .npy header: string keys,
// values that are strings, True/False, or tuples of non-negative integers.
func parsePyDict(s string) (map[string]any, error) {
	p := &pyParser{s: s}
	p.space()
	if !p.eat('{') {
		return nil, fmt.Errorf("want '{' at offset %d", p.i)
	}
	out := make(map[string]any)
	for {
		p.space()
		if p.eat('}') {
			break
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.space()
		if !p.eat(':') {
			return nil, fmt.Errorf("want ':' after key %q at offset %d", key, p.i)
		}
		p.space()
		val, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("key %q: %v", key, err)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		out[key] = val
		p.space()
		if p.eat(',') {
			continue
		}
		p.space()
		if !p.eat('}') {
			return nil, fmt.Errorf("want ',' or '}' at offset %d", p.i)
		}
		break
	}
	if rest := strings.TrimSpace(p.s[p.i:]); rest != "" {
		return nil, fmt.Errorf("unexpected %q after the dict", trunc(rest))
	}
	return out, nil
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) str() (string, error) {
	if p.i >= len(p.s) || (p.s[p.i] != '\'' && p.s[p.i] != '"') {
		return "", fmt.Errorf("want a quoted string at offset %d", p.i)
	}
	q := p.s[p.i]
	end := strings.IndexByte(p.s[p.i+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at offset %d", p.i)
	}
	v := p.s[p.i+1 : p.i+1+end]
	if strings.IndexByte(v, '\\') >= 0 {
		return "", fmt.Errorf("escaped strings are not supported at offset %d", p.i)
	}
	p.i += end + 2
	return v, nil
}

func (p *pyParser) value() (any, error) {
	switch {
	case p.i >= len(p.s):
		return nil, fmt.Errorf("missing value")
	case p.s[p.i] == '\'' || p.s[p.i] == '"':
		return p.str()
	case strings.HasPrefix(p.s[p.i:], "True"):
		p.i += 4
		return true, nil
	case strings.HasPrefix(p.s[p.i:], "False"):
		p.i += 5
		return false, nil
	case p.s[p.i] == '(':
		p.i++
		var dims []int
		for {
			p.space()
			if p.eat(')') {
				return append([]int{}, dims...), nil
			}
			j := p.i
			for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
				p.i++
			}
			p.eat('L') // Python 2 long suffix
			d, err := strconv.Atoi(strings.TrimSuffix(p.s[j:p.i], "L"))
			if err != nil || d < 0 {
				return nil, fmt.Errorf("bad dimension at offset %d", j)
			}
			dims = append(dims, d)
			p.space()
			if p.eat(',') {
				continue
			}
			if !p.eat(')') {
				return nil, fmt.Errorf("want ',' or ')' at offset %d", p.i)
			}
			return dims, nil
		}
	}
	return nil, fmt.Errorf("unsupported value %q", trunc(p.s[p.i:]))
}

func trunc(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// isNPY reports whether b starts with the .npy magic.
func isNPY(b []byte) bool { return bytes.HasPrefix(b, []byte(npyMagic)) }
