package registry

import "syscall"

// sysProcAttr puts the registry in its own process group (so Stop can kill
// everything it spawned) and asks the kernel to kill it if the test process
// dies first, so no registry outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
