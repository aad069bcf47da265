package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"gopkg.in/yaml.v3"
)

// TestSchedulerExamples runs testdata/sched/*.txtar with the repository's
// examples/slurm/sweep.sbatch and examples/kubernetes/sweep-job.yaml in
// the work directory: the scripts run their shards as separate processes
// with the scheduler's variables set.
func TestSchedulerExamples(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/sched",
		Setup: func(env *testscript.Env) error {
			for _, f := range []string{"slurm/sweep.sbatch", "kubernetes/sweep-job.yaml"} {
				b, err := os.ReadFile(filepath.Join("..", "..", "examples", f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(env.WorkDir, filepath.Base(f)), b, 0o644); err != nil {
					return err
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"k8sjob": k8sJob},
	})
}

// k8sJob checks an Indexed Job manifest that runs ginsim sweep and sets
// JOB_COMPLETIONS to its completions, and exports that variable.
func k8sJob(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: k8sjob MANIFEST")
	}
	var job struct {
		Kind string `yaml:"kind"`
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int    `yaml:"completions"`
			Template       struct {
				Spec struct {
					Containers []struct {
						Command []string `yaml:"command"`
						Env     []struct{ Name, Value string }
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	ts.Check(yaml.Unmarshal([]byte(ts.ReadFile(args[0])), &job))
	if job.Kind != "Job" || job.Spec.CompletionMode != "Indexed" || job.Spec.Completions < 1 {
		ts.Fatalf("%s: want an Indexed Job with completions, have kind %q mode %q completions %d", args[0], job.Kind,
			job.Spec.CompletionMode, job.Spec.Completions)
	}
	cs := job.Spec.Template.Spec.Containers
	if len(cs) != 1 || len(cs[0].Command) < 2 || cs[0].Command[0] != "ginsim" || cs[0].Command[1] != "sweep" {
		ts.Fatalf("%s: want one container running ginsim sweep", args[0])
	}
	i := slices.IndexFunc(cs[0].Env, func(e struct{ Name, Value string }) bool { return e.Name == "JOB_COMPLETIONS" })
	if i < 0 || cs[0].Env[i].Value != strconv.Itoa(job.Spec.Completions) {
		ts.Fatalf("%s: JOB_COMPLETIONS must be set to completions (%d)", args[0], job.Spec.Completions)
	}
	ts.Setenv("JOB_COMPLETIONS", cs[0].Env[i].Value)
}
