package sweep

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/ginsim/ginsim/traces/replay"
	"gopkg.in/yaml.v3"
)

// Metrics are what a row reports of its replay: the means over layers of
// the phase times and bandwidths, the receive-time tails, and the
// transport's counters summed over layers.
type Metrics struct {
	DispatchUS    float64 `json:"dispatch_us"`
	CombineUS     float64 `json:"combine_us"`
	DispatchGBps  float64 `json:"dispatch_GBps"`
	CombineGBps   float64 `json:"combine_GBps"`
	DispatchP50US float64 `json:"dispatch_p50_us"`
	DispatchP99US float64 `json:"dispatch_p99_us"`
	DispatchMaxUS float64 `json:"dispatch_max_us"`
	CombineP50US  float64 `json:"combine_p50_us"`
	CombineP99US  float64 `json:"combine_p99_us"`
	CombineMaxUS  float64 `json:"combine_max_us"`
	Lost          uint64  `json:"packets_lost"`
	Dropped       uint64  `json:"packets_dropped"`
	Corrupted     uint64  `json:"packets_corrupted"`
	Retransmits   uint64  `json:"retransmits"`
	SeqNAKs       uint64  `json:"seq_naks"`
	Timeouts      uint64  `json:"timeouts"`
	Events        uint64  `json:"events"`
}

// metricNames are Metrics' JSON names in order: the CSV columns and what
// Plot can draw.
var metricNames = []string{"dispatch_us", "combine_us", "dispatch_GBps", "combine_GBps", "dispatch_p50_us",
	"dispatch_p99_us", "dispatch_max_us", "combine_p50_us", "combine_p99_us", "combine_max_us", "packets_lost",
	"packets_dropped", "packets_corrupted", "retransmits", "seq_naks", "timeouts", "events"}

// MetricNames lists the metrics of a row.
func MetricNames() []string { return slices.Clone(metricNames) }

func metricsOf(r *replay.Report) Metrics {
	t := r.Transport
	return Metrics{DispatchUS: r.DispatchUS, CombineUS: r.CombineUS, DispatchGBps: r.DispatchGBps, CombineGBps: r.CombineGBps,
		DispatchP50US: r.RecvTail.Dispatch.P50, DispatchP99US: r.RecvTail.Dispatch.P99, DispatchMaxUS: r.RecvTail.Dispatch.Max,
		CombineP50US: r.RecvTail.Combine.P50, CombineP99US: r.RecvTail.Combine.P99, CombineMaxUS: r.RecvTail.Combine.Max,
		Lost: t.Lost, Dropped: t.Dropped, Corrupted: t.Corrupted, Retransmits: t.Retransmits, SeqNAKs: t.SeqNAKs,
		Timeouts: t.Timeouts, Events: r.Events}
}

func (m *Metrics) values() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	return []string{f(m.DispatchUS), f(m.CombineUS), f(m.DispatchGBps), f(m.CombineGBps), f(m.DispatchP50US),
		f(m.DispatchP99US), f(m.DispatchMaxUS), f(m.CombineP50US), f(m.CombineP99US), f(m.CombineMaxUS),
		u(m.Lost), u(m.Dropped), u(m.Corrupted), u(m.Retransmits), u(m.SeqNAKs), u(m.Timeouts), u(m.Events)}
}

// Row is one point's result: a line of the JSON Lines output and a row of
// the CSV.
type Row struct {
	Study string `json:"study"`
	Index int    `json:"index"`
	ID    string `json:"id"`
	// Axes are the point's value of every varying key, as written.
	Axes     map[string]string `json:"axes"`
	Settings Settings          `json:"settings"`
	// Cluster is the point's whole cluster, as `cluster show` prints it.
	Cluster map[string]any `json:"cluster"`
	Metrics *Metrics       `json:"metrics,omitempty"`
	// Error is why the replay failed ("" if it did not).
	Error   string `json:"error,omitempty"`
	Version string `json:"version"`
}

// clusterMap renders a spec as a generic map (the YAML of cluster show).
func clusterMap(s machine.Spec) map[string]any {
	b, err := machine.MarshalSpec(s)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil
	}
	// Through JSON, so that a row read back compares equal.
	j, _ := json.Marshal(m)
	m = nil
	_ = json.Unmarshal(j, &m)
	return m
}

// settingColumns are the CSV's settings columns.
var settingColumns = []string{"trace", "model", "ep", "tokens", "routing", "layers", "trace_seed", "cluster", "mode",
	"backend", "nvlink", "rdma_only", "sms", "seed", "ib_timeout"}

func (s *Settings) values() []string {
	return []string{s.Trace, s.Model, strconv.Itoa(s.EP), strconv.Itoa(s.Tokens), s.Routing, strconv.Itoa(s.Layers),
		strconv.FormatUint(s.TraceSeed, 10), s.Cluster, s.Mode, s.Backend, strconv.FormatBool(s.NVLink),
		strconv.FormatBool(s.RDMAOnly), strconv.Itoa(s.SMs), strconv.FormatUint(s.Seed, 10), strconv.Itoa(int(s.IBTimeout))}
}

// WriteJSONL writes rows, one JSON object a line.
func WriteJSONL(w io.Writer, rows []Row) error {
	bw := bufio.NewWriter(w)
	for i := range rows {
		b, err := json.Marshal(&rows[i])
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// ReadJSONL reads rows written by WriteJSONL; name locates errors.
func ReadJSONL(r io.Reader, name string) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var row Row
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if row.ID == "" {
			return nil, fmt.Errorf("%s:%d: row has no id", name, line)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rows, nil
}

// ReadJSONLFile reads a JSON Lines file; a missing file has no rows.
func ReadJSONLFile(path string) ([]Row, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadJSONL(f, path)
}

// WriteCSV writes rows as CSV: id, index, the axes that are cluster
// fields, the settings, the metrics, error and version.
func WriteCSV(w io.Writer, axes []string, rows []Row) error {
	var fieldAxes []string
	for _, a := range axes {
		if !slices.Contains(settingKeys, a) {
			fieldAxes = append(fieldAxes, a)
		}
	}
	cw := csv.NewWriter(w)
	head := append([]string{"study", "index", "id"}, fieldAxes...)
	head = append(head, settingColumns...)
	head = append(head, metricNames...)
	head = append(head, "error", "version")
	if err := cw.Write(head); err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		rec := []string{r.Study, strconv.Itoa(r.Index), r.ID}
		for _, a := range fieldAxes {
			rec = append(rec, r.Axes[a])
		}
		rec = append(rec, r.Settings.values()...)
		if r.Metrics != nil {
			rec = append(rec, r.Metrics.values()...)
		} else {
			rec = append(rec, make([]string, len(metricNames))...)
		}
		rec = append(rec, r.Error, r.Version)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Table is a CSV file read back: its header and records.
type Table struct {
	Header  []string
	Records [][]string
}

// Column returns the index of a column, or -1.
func (t *Table) Column(name string) int { return slices.Index(t.Header, name) }

// ReadCSV reads a CSV written by WriteCSV (or any CSV with a header).
func ReadCSV(r io.Reader, name string) (*Table, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: empty file", name)
	}
	return &Table{Header: recs[0], Records: recs[1:]}, nil
}
