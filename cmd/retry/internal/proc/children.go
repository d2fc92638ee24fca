package proc

import (
	"os/exec"
	"sync"
)

// WholeProcess is true when retry is the whole process (set by main): the
// children it did not start itself are then the orphans it adopted as a
// subreaper, which it may reap. (In a test binary, other code starts
// children that their own Wait must reap.)
var WholeProcess bool

// Children are the attempts retry started and has not waited for yet. With
// reap set, the other zombie children, orphans that retry adopted (see
// BecomeSubreaper), are reaped as they exit, and never an attempt before
// its own Wait (whose exit status would be lost).
type Children struct {
	mu   sync.Mutex
	pids map[int]bool
	Reap bool
}

// Start starts cmd as a child the reaper leaves to cmd.Wait.
func (c *Children) Start(cmd *exec.Cmd) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	if c.pids == nil {
		c.pids = make(map[int]bool)
	}
	c.pids[cmd.Process.Pid] = true
	return nil
}

// Wait waits for cmd, started by start, then reaps the orphans that exited
// meanwhile.
func (c *Children) Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	c.mu.Lock()
	delete(c.pids, cmd.Process.Pid)
	c.mu.Unlock()
	c.reapOrphans()
	return err
}

// reapOrphans reaps the zombie children that are not attempts (see reap).
func (c *Children) reapOrphans() {
	if !c.Reap {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	reapZombies(func(pid int) bool { return c.pids[pid] })
}
