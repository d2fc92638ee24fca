package proc

import (
	"syscall"
	"testing"
)

// TestSignalNames: every signal the platform has, by name (with or
// without SIG, any case) or number, as timeout -s.
func TestSignalNames(t *testing.T) {
	for in, want := range map[string]syscall.Signal{
		"SEGV": syscall.SIGSEGV, "cont": syscall.SIGCONT, "SIGSTOP": syscall.SIGSTOP, "sigwinch": syscall.SIGWINCH,
		"TSTP": syscall.SIGTSTP, "CHLD": syscall.SIGCHLD, "IO": syscall.SIGIO, "PWR": syscall.SIGPWR,
		"SYS": syscall.SIGSYS, "XCPU": syscall.SIGXCPU, "URG": syscall.SIGURG, "TTOU": syscall.SIGTTOU,
		"9": syscall.SIGKILL, "RTMIN": 34, "RTMIN+1": 35, "SIGRTMAX": 64, "RTMAX-2": 62, "64": 64,
		"iot": syscall.SIGABRT, "SIGCLD": syscall.SIGCHLD, "rtmax": 64, "RTMIN+0": 34,
		"0": 0, "EXIT": 0, "sigexit": 0, // none, as timeout -s 0
	} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("parseSignal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "NOPE", "65", "-0", "+0", "EXIT0", "-1", "RTMIN+31", "RTMAX-31", "RTMIN+x", "SIG", "RTMIN-1", "RTMAX+1", "RTMIN+-1", "RTMIN++1", "SIGSIG", " TERM"} {
		if _, err := ParseSignal(bad); err == nil {
			t.Errorf("parseSignal(%q) accepted", bad)
		}
	}
	for sig, want := range map[syscall.Signal]string{syscall.SIGWINCH: "WINCH", 34: "RTMIN", 35: "RTMIN+1", 49: "RTMIN+15", 50: "RTMAX-14", 64: "RTMAX", 32: "32"} {
		if n := SignalName(sig); n != want {
			t.Errorf("signalName(%d) = %q, want %q", int(sig), n, want)
		}
	}
}
