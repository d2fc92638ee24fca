package proc

import (
	"os"
	"sync/atomic"
	"syscall"
)

// receivedSignal is the number of the first signal of ForwardedSignals
// that retry received (0 if none): Ctrl-C, SIGTERM, SIGHUP or SIGQUIT, which
// end a run of any mode.
var receivedSignal atomic.Int32

// NoteSignal records s as the signal retry received, if it is the first.
func NoteSignal(s os.Signal) {
	if n, ok := s.(syscall.Signal); ok {
		receivedSignal.CompareAndSwap(0, int32(n))
	}
}

// ExitProcess ends retry with code, the run's exit status. A run that
// ended on a signal retry received (code is 128+N for the signal N noted)
// ends by that signal, once the attempt is gone and the summary written,
// as timeout(1) and a shell do: a calling shell then sees a death by
// SIGINT, not an exit status of 130, and stops its loop or script too (it
// takes an exit status for a command that handled Ctrl-C itself). Where
// the process cannot end by the signal (see ExitBySignal), it exits with
// code.
func ExitProcess(code int) {
	if n := receivedSignal.Load(); n != 0 && code == 128+int(n) {
		ExitBySignal(syscall.Signal(n))
	}
	os.Exit(code)
}
