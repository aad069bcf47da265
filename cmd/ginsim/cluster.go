package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/ginsim/ginsim/gin/machine"
	"github.com/spf13/cobra"
)

func init() { Register("", newClusterCmd) }

func newClusterCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "List and show cluster descriptions (built-in presets and YAML files)",
		Long: `A cluster is nodes of GPUs with NICs, NVLink inside each node and a switched
fabric between NIC ports, plus a hardware profile holding every device's timing
constants. Use a preset name or a YAML file wherever a cluster is asked for; a
file may start from a preset with "base: NAME" and override any field.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in cluster presets and hardware profiles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "PRESET\tPROFILE\tGPUS/NODE\tNICS/GPU\tLINK\tTOPOLOGY\tDESCRIPTION")
			for _, p := range machine.Presets() {
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", p.Name, p.Profile, p.GPUsPerNode, p.NICsPerGPU,
					p.LinkRate, p.Topology.Kind, p.Description)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout())
			w = tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "PROFILE\tDESCRIPTION")
			for _, n := range machine.ProfileNames() {
				p, _ := machine.ProfileByName(n)
				fmt.Fprintf(w, "%s\t%s\n", p.Name, p.Description)
			}
			return w.Flush()
		},
	})
	var asWritten bool
	show := &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print a preset or a cluster file's full effective configuration as YAML",
		Long: `show prints the cluster with every default resolved: the profile's device
constants (gpu, nic, pcie, nvlink, proxy, gdaki sections), the PCIe layout and
the switches' buffers and ECN thresholds. The output is itself a cluster file
that builds the same machine; edit any field and pass it back with --cluster.
docs/cluster.md is the field reference.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := resolveCluster(args[0])
			if err != nil {
				return err
			}
			if !asWritten {
				if s, err = machine.Effective(s); err != nil {
					return err
				}
			}
			b, err := machine.MarshalSpec(s)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
	show.Flags().BoolVar(&asWritten, "as-written", false, "print only the fields the preset or file sets, not the resolved defaults")
	c.AddCommand(show)
	return c
}

// resolveCluster resolves a preset name or a cluster file; a missing file
// that is not a preset name is a usage error.
func resolveCluster(arg string) (machine.Spec, error) {
	if s, ok := machine.Preset(arg); ok {
		return s, nil
	}
	if _, err := os.Stat(arg); errors.Is(err, os.ErrNotExist) {
		return machine.Spec{}, Usagef("cluster %q is neither a preset (%v) nor a file", arg, machine.PresetNames())
	}
	return machine.LoadSpec(arg)
}
