package proc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// ParseSignal parses a signal as timeout -s does: any name of the
// platform's signals (TERM, SIGTERM, term, WINCH, RTMIN+1) or number, and 0
// or EXIT for none (the timeout sends no signal; only --kill-after's
// SIGKILL comes).
func ParseSignal(s string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(s); err == nil && strings.Trim(s, "0123456789") == "" {
		if n == 0 {
			return 0, nil
		}
		if !validSignal(n) {
			return 0, fmt.Errorf("no signal %d here", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(s)
	if rest, ok := strings.CutPrefix(name, "SIG"); ok && rest != "" {
		name = rest
	}
	if name == "EXIT" {
		return 0, nil
	}
	if sig, ok := signalByName(name); ok && name != "" {
		return sig, nil
	}
	return 0, errors.New("unknown signal (want a name of kill -l, e.g. TERM, INT, HUP, KILL, USR1, a number, or 0 for none)")
}

// SignalName returns "TERM" for SIGTERM, else the signal's number.
func SignalName(s syscall.Signal) string {
	if name := platformSignalName(s); name != "" {
		return name
	}
	return strconv.Itoa(int(s))
}
