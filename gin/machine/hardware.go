package machine

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ginsim/ginsim/fabric"
	"github.com/ginsim/ginsim/fabric/topo"
	"github.com/ginsim/ginsim/sim"
	"gopkg.in/yaml.v3"
)

// Params sets fields of one device configuration (gpu.Config, nic.Config,
// pcie.Config, nvlink.Config, proxy.Config, gdaki.Config) over the
// profile's values. Keys are the Go field names in snake_case ("sms",
// "tx_packet_cost"; a nested struct's fields are dotted: "cc.ai"); values
// carry units by the field's type: durations "150ns", rates "400Gb/s",
// sizes "4KiB"; counts, cycles, flags and probabilities are plain.
type Params map[string]string

// Defaults of the PCIe switch layout (Spec.GPUsPerPCIeSwitch and
// Spec.PCIeSwitchPorts).
const (
	// DefaultGPUsPerPCIeSwitch is HGX H100's layout: each Gen5 switch
	// joins two GPUs and their NICs to the host.
	DefaultGPUsPerPCIeSwitch = 2
	// DefaultPCIeSwitchPorts is the x16 downstream ports of a 144-lane
	// Gen5 switch (Broadcom PEX89144 class): nine x16 ports, one of them
	// the upstream port to the CPU.
	DefaultPCIeSwitchPorts = 8
)

// pcieLayout returns the effective PCIe switch layout of s.
func (s *Spec) pcieLayout() (gpus, ports int) {
	gpus, ports = s.GPUsPerPCIeSwitch, s.PCIeSwitchPorts
	if gpus == 0 {
		gpus = DefaultGPUsPerPCIeSwitch
	}
	if ports == 0 {
		ports = DefaultPCIeSwitchPorts
	}
	return gpus, ports
}

// section is one Params section of a Spec and the configuration it sets.
type section struct {
	name string
	p    Params
	cfg  any // pointer to the profile's config struct
	skip map[string]string
}

func (s *Spec) sections(prof *Profile) []section {
	return []section{
		{"gpu", s.GPU, &prof.GPU, nil},
		{"nic", s.NIC, &prof.NIC, nil},
		{"pcie", s.PCIe, &prof.PCIe, nil},
		{"nvlink", s.NVLink.Params, &prof.NVLink,
			map[string]string{"port_rate": "nvlink.bandwidth", "latency": "nvlink.latency"}},
		{"proxy", s.Proxy, &prof.Proxy, nil},
		{"gdaki", s.GDAKI, &prof.GDAKI, nil},
	}
}

// Hardware returns the effective device configurations of s: its profile,
// the nvlink bandwidth and latency, the lossless fabric's NIC settings
// (no ECN, no DCQCN) and then every Params section, validated. Errors are
// *FieldErrors naming the field ("gpu.sms").
func (s *Spec) Hardware() (Profile, error) {
	prof, ok := profileByName(s.Profile)
	if !ok {
		return Profile{}, &FieldError{Field: "profile", Msg: fmt.Sprintf("unknown profile %q (have %v)", s.Profile, ProfileNames())}
	}
	prof.NVLink.PortRate = sim.BitRate(s.NVLink.Bandwidth)
	prof.NVLink.Latency = sim.Duration(s.NVLink.Latency)
	if s.Topology.Lossless {
		// Credit flow control instead of ECN: RoCE's DCQCN does not run
		// on an InfiniBand port (IB congestion control is not modelled).
		prof.NIC.ECT, prof.NIC.DCQCN = false, false
	}
	for _, sec := range s.sections(&prof) {
		keys := make([]string, 0, len(sec.p))
		for k := range sec.p {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if use, ok := sec.skip[k]; ok {
				return Profile{}, &FieldError{Field: sec.name + "." + k, Msg: "set " + use + " instead"}
			}
			if err := setParam(sec.cfg, k, sec.p[k]); err != nil {
				return Profile{}, &FieldError{Field: sec.name + "." + k, Msg: err.Error()}
			}
		}
	}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"gpu", prof.GPU.Validate()}, {"nic", prof.NIC.Validate()}, {"pcie", prof.PCIe.Validate()},
		{"nvlink", prof.NVLink.Validate()}, {"proxy", prof.Proxy.Validate()}, {"gdaki", prof.GDAKI.Validate()},
	} {
		if c.err != nil {
			return Profile{}, &FieldError{Field: c.name, Msg: c.err.Error()}
		}
	}
	return prof, nil
}

// Effective returns s with every default resolved: each Params section
// lists every field of its configuration, and the PCIe layout and the
// fabric's buffer and ECN settings are explicit. Loading its YAML form
// (MarshalSpec) back builds the same machine.
func Effective(s Spec) (Spec, error) {
	prof, err := s.Hardware()
	if err != nil {
		return Spec{}, err
	}
	s.GPUsPerPCIeSwitch, s.PCIeSwitchPorts = s.pcieLayout()
	out := s
	for _, sec := range out.sections(&prof) {
		p := Params{}
		flatten(reflect.ValueOf(sec.cfg).Elem(), "", p)
		for k := range sec.skip {
			delete(p, k)
		}
		switch sec.name {
		case "gpu":
			out.GPU = p
		case "nic":
			out.NIC = p
		case "pcie":
			out.PCIe = p
		case "nvlink":
			out.NVLink.Params = p
		case "proxy":
			out.Proxy = p
		case "gdaki":
			out.GDAKI = p
		}
	}
	out.Topology = s.Topology.withDefaults()
	return out, nil
}

// snake turns a Go field name into its YAML key: TxPacketCost →
// tx_packet_cost, SMs → sms, CNPInterval → cnp_interval.
func snake(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			// "SMs", "QPs": a plural acronym is one word.
			plural := nextLower && r[i+1] == 's' && (i+2 == len(r) || unicode.IsUpper(r[i+2]))
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower && !plural) {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

var (
	durType  = reflect.TypeFor[sim.Duration]()
	rateType = reflect.TypeFor[sim.BitRate]()
	sizeType = reflect.TypeFor[sim.Bytes]()
)

// internal reports whether a configuration field is not cluster hardware
// and so has no YAML key: verification's mutants and perturbation knobs
// (Mutations, WriteJitter; set by gin/verify through machine.BuildTuned)
// and callbacks (proxy.Config.CPUPermille, set from faults.slow_proxy).
func internal(f reflect.StructField) bool {
	switch f.Name {
	case "Mutations", "WriteJitter":
		return true
	}
	return !f.IsExported() || f.Type.Kind() == reflect.Func
}

// field finds the field of struct v named by a dotted snake_case key.
func field(v reflect.Value, key string) (reflect.Value, bool) {
	head, rest, nested := strings.Cut(key, ".")
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if internal(f) || snake(f.Name) != head {
			continue
		}
		fv := v.Field(i)
		if nested {
			if fv.Kind() != reflect.Struct || fv.Type() == durType {
				return reflect.Value{}, false
			}
			return field(fv, rest)
		}
		if fv.Kind() == reflect.Struct {
			return reflect.Value{}, false
		}
		return fv, true
	}
	return reflect.Value{}, false
}

// keys lists the dotted keys of struct type t.
func keys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if internal(f) {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, keys(f.Type, prefix+snake(f.Name)+".")...)
			continue
		}
		out = append(out, prefix+snake(f.Name))
	}
	return out
}

// setParam sets the field of *cfg named by key from text.
func setParam(cfg any, key, text string) error {
	v := reflect.ValueOf(cfg).Elem()
	f, ok := field(v, key)
	if !ok {
		return fmt.Errorf("unknown field (have %s)", strings.Join(keys(v.Type(), ""), ", "))
	}
	text = strings.TrimSpace(text)
	switch f.Type() {
	case durType:
		d, err := ParseDuration(text)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	case rateType:
		r, err := ParseRate(text)
		if err != nil {
			return err
		}
		f.SetInt(int64(r))
		return nil
	case sizeType:
		n, err := ParseSize(text)
		if err != nil {
			return err
		}
		f.SetInt(int64(n))
		return nil
	}
	switch f.Kind() {
	case reflect.Bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return fmt.Errorf("%q: want true or false", text)
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(text, 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q: want an integer of %d bits", text, f.Type().Bits())
		}
		f.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(text, 10, f.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q: want a non-negative integer of %d bits", text, f.Type().Bits())
		}
		f.SetUint(n)
	case reflect.Float64, reflect.Float32:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%q: want a number", text)
		}
		f.SetFloat(x)
	default:
		return fmt.Errorf("field of type %v cannot be set from YAML", f.Type())
	}
	return nil
}

// flatten writes every field of struct v into p, formatted with units.
func flatten(v reflect.Value, prefix string, p Params) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if internal(sf) {
			continue
		}
		f, key := v.Field(i), prefix+snake(sf.Name)
		switch {
		case f.Type() == durType:
			p[key] = Duration(f.Int()).String()
		case f.Type() == rateType:
			p[key] = Rate(f.Int()).String()
		case f.Type() == sizeType:
			p[key] = FormatSize(sim.Bytes(f.Int()))
		case f.Kind() == reflect.Struct:
			flatten(f, key+".", p)
		case f.Kind() == reflect.Bool:
			p[key] = strconv.FormatBool(f.Bool())
		case f.CanInt():
			p[key] = strconv.FormatInt(f.Int(), 10)
		case f.CanUint():
			p[key] = strconv.FormatUint(f.Uint(), 10)
		case f.CanFloat():
			p[key] = strconv.FormatFloat(f.Float(), 'g', -1, 64)
		}
	}
}

var sizeUnits = []struct {
	suffix string
	bytes  int64
}{
	{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"kB", 1e3}, {"B", 1},
}

// ParseSize parses a size such as "4KiB", "2MiB" or "64B"; a bare number
// is bytes.
func ParseSize(s string) (sim.Bytes, error) {
	s = strings.TrimSpace(s)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			v, err := scaled(strings.TrimSuffix(s, u.suffix), u.bytes, "size")
			if errors.Is(err, errNaN) {
				return 0, fmt.Errorf("size %q: want a number with a unit such as 4KiB or 64B", s)
			}
			return sim.Bytes(v), err
		}
	}
	v, err := scaled(s, 1, "size")
	if err != nil {
		return 0, fmt.Errorf("size %q: want a number with a unit such as 4KiB or 64B", s)
	}
	return sim.Bytes(v), nil
}

// FormatSize writes a size in the largest binary unit that holds it
// exactly.
func FormatSize(b sim.Bytes) string {
	for _, u := range sizeUnits[:3] {
		if b != 0 && int64(b)%u.bytes == 0 {
			return strconv.FormatInt(int64(b)/u.bytes, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// Size is a byte count in a Spec. In YAML it is a number with a unit:
// "2MiB", "128KiB", "64B", "1GB"; a bare number is bytes.
type Size sim.Bytes

// String formats the size with FormatSize.
func (z Size) String() string { return FormatSize(sim.Bytes(z)) }

// MarshalYAML writes the size with its unit.
func (z Size) MarshalYAML() (any, error) { return z.String(), nil }

// UnmarshalYAML reads a size with a unit.
func (z *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a size such as 2MiB")
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return err
	}
	*z = Size(v)
	return nil
}

// withDefaults returns t with the switch buffer and ECN settings and the
// oversubscription explicit.
func (t Topology) withDefaults() Topology {
	d := fabric.DefaultSwitchConfig()
	if t.PortBuffer == 0 && !t.Lossless {
		t.PortBuffer = Size(d.PortBuffer)
	}
	if t.ECNKmin == 0 {
		t.ECNKmin = Size(d.ECN.Kmin)
	}
	if t.ECNKmax == 0 {
		t.ECNKmax = Size(d.ECN.Kmax)
	}
	if t.ECNPmax == 0 {
		t.ECNPmax = d.ECN.Pmax
	}
	if t.Oversubscription == 0 && (t.Kind == TopoRailOptimized || t.Kind == TopoLeafSpine) {
		t.Oversubscription = 1
	}
	return t
}

// validateHardware checks the fields of hardware.go: the fabric's finer
// shape, the PCIe layout against the NICs per GPU, and every device
// configuration.
func (s *Spec) validateHardware() error {
	fe := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	t := s.Topology
	switch {
	case t.Oversubscription < 0:
		return fe("topology.oversubscription", "must not be negative")
	case t.Oversubscription > 1 && t.Kind != TopoRailOptimized && t.Kind != TopoLeafSpine:
		return fe("topology.oversubscription", "applies to rail-optimized and leaf-spine topologies only")
	case t.K != 0 && t.Kind != TopoFatTree:
		return fe("topology.k", "applies to a fat-tree topology only")
	case t.K < 0 || t.K%2 != 0 || t.K > 128:
		return fe("topology.k", "%d must be even and in [2, 128] (0: the smallest that holds the NIC ports)", t.K)
	case t.Kind == TopoFatTree && t.Spines != 0:
		return fe("topology.spines", "a fat tree has (k/2)² core switches: set topology.k instead")
	case t.Lossless && t.PortBuffer != 0:
		return fe("topology.port_buffer", "a lossless fabric has unbounded buffers")
	case t.ECNPmax < 0 || t.ECNPmax > 1:
		return fe("topology.ecn_pmax", "%g must be in [0, 1]", t.ECNPmax)
	}
	if d := t.withDefaults(); d.ECNKmax < d.ECNKmin {
		return fe("topology.ecn_kmax", "%v must be at least ecn_kmin (%v)", d.ECNKmax, d.ECNKmin)
	}
	if t.Kind == TopoFatTree && t.K != 0 && s.Nodes != 0 {
		if eps := s.Nodes * s.GPUsPerNode * s.NICsPerGPU; eps > topo.FatTreeHosts(t.K) {
			return fe("topology.k", "a k=%d fat tree has %d host ports, fewer than the %d NIC ports of %d nodes",
				t.K, topo.FatTreeHosts(t.K), eps, s.Nodes)
		}
	}
	if s.GPUsPerPCIeSwitch < 0 || s.GPUsPerPCIeSwitch > s.GPUsPerNode {
		return fe("gpus_per_pcie_switch", "%d out of range [1, gpus_per_node = %d] (0: %d)",
			s.GPUsPerPCIeSwitch, s.GPUsPerNode, DefaultGPUsPerPCIeSwitch)
	}
	if s.PCIeSwitchPorts < 0 || s.PCIeSwitchPorts > 64 {
		return fe("pcie_switch_ports", "%d out of range [1, 64] (0: %d)", s.PCIeSwitchPorts, DefaultPCIeSwitchPorts)
	}
	g, ports := s.pcieLayout()
	g = min(g, s.GPUsPerNode)
	if need := g * (1 + s.NICsPerGPU); need > ports {
		return fe("nics_per_gpu", "%d NICs per GPU do not fit the PCIe tree: a switch of %d x16 downstream ports holds "+
			"%d GPUs and at most %d NICs per GPU (%d devices wanted; see gpus_per_pcie_switch, pcie_switch_ports)",
			s.NICsPerGPU, ports, g, ports/g-1, need)
	}
	_, err := s.Hardware()
	return err
}

// MarshalYAML writes the fields sorted by key, values unquoted where YAML
// allows.
func (p Params) MarshalYAML() (any, error) {
	ks := make([]string, 0, len(p))
	for k := range p {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, k := range ks {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k},
			&yaml.Node{Kind: yaml.ScalarNode, Value: p[k]})
	}
	return n, nil
}
