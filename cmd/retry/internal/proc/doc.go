// Package proc is retry's process control, as timeout(1) does it: each
// attempt in a process group of its own (or the terminal's, with
// --foreground), the signals retry relays, job control (Ctrl-Z, fg, bg),
// the watchdog that ends an attempt's group if retry is killed, the
// subreaper that reaps a killed shell's orphans, signal names, the
// terminal, and ending retry by the signal it got. It knows nothing of
// HTTP or of retry's flags.
package proc

import "os/exec"

// NewProcess returns the running attempt cmd, in a process group of its own
// (group: pgid, or the one it leads if pgid is 0) or in retry's.
func NewProcess(cmd *exec.Cmd, group bool, pgid int) *Process {
	return &Process{cmd: cmd, group: group, pgid: pgid}
}
