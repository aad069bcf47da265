package hw

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ExecConfig says how Exec drives the executor on a GPU machine.
type ExecConfig struct {
	// Bin holds native/build.sh's output: ginexec and
	// libnccl-net-ginhw.so.
	Bin string
	// Dir receives the op lists, result files, logs and traces (the names
	// run.sh gives them, so LoadDevice and --results read them).
	Dir string
	// Fabric is the emulated link (Zero: none).
	Fabric Fabric
	// Timeout bounds one case's two processes.
	Timeout time.Duration
}

// Exec runs case c through real NCCL: two processes of the executor on
// GPU 0, told apart by NCCL_HOSTID, with ginsim's plugin as NCCL's network.
func Exec(cfg ExecConfig, c Case) (*Device, error) {
	ops, _, err := Lower(c.File)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	opsPath := filepath.Join(cfg.Dir, c.Name+".ops")
	if err := os.WriteFile(opsPath, ops, 0o644); err != nil {
		return nil, err
	}
	plugin, err := filepath.Abs(filepath.Join(cfg.Bin, "libnccl-net-ginhw.so"))
	if err != nil {
		return nil, err
	}
	exe := filepath.Join(cfg.Bin, "ginexec")
	for _, p := range []string{plugin, exe} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("hw: %v (build with validate/hw/native/build.sh %s)", err, cfg.Bin)
		}
	}
	tag := c.Name + "." + cfg.Fabric.Name
	id := filepath.Join(cfg.Dir, "id."+tag)
	stale, _ := filepath.Glob(id + "*")
	for _, f := range stale {
		os.Remove(f)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	env := append(os.Environ(), "NCCL_NVLS_ENABLE=0", "NCCL_IB_DISABLE=1", "NCCL_MNNVL_ENABLE=0", "NCCL_GIN_TYPE=2",
		"NCCL_GIN_NCONTEXTS=1", "NCCL_DEBUG=WARN", "NCCL_NET_PLUGIN="+plugin, "GINHW_FABRIC="+cfg.Fabric.Env(),
		"GINHW_TRACE="+filepath.Join(cfg.Dir, tag+".trace"), "GINHW_WAIT_MS=2000", "GINHW_KERNEL_S=20")
	var cmds [Ranks]*exec.Cmd
	for r := range Ranks {
		cmd := exec.CommandContext(ctx, exe, fmt.Sprint(r), fmt.Sprint(Ranks), id, opsPath,
			filepath.Join(cfg.Dir, fmt.Sprintf("%s.r%d.txt", tag, r)))
		cmd.Env = append(env, fmt.Sprintf("NCCL_HOSTID=host%c", 'A'+r))
		log, err := os.Create(filepath.Join(cfg.Dir, fmt.Sprintf("%s.r%d.log", tag, r)))
		if err != nil {
			return nil, err
		}
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("hw: start rank %d: %w", r, err)
		}
		cmds[r] = cmd
	}
	for _, cmd := range cmds {
		cmd.Wait() // a failed rank shows in its result file
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("hw: %s: the ranks did not end within %v", tag, timeout)
	}
	return LoadDevice(os.DirFS(cfg.Dir), c.Name, cfg.Fabric.Name)
}
