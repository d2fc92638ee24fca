package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/backoffkit/retry/cmd/retry/internal/proc"
)

// jobShell (mode "jobshell") does what an interactive shell does with one
// job: it runs the command $JOB_ARGV (JSON) in a process group of its own,
// in the foreground of its terminal (stdin). It says "ready PID PGID" of
// itself first, then "job PID" once the job runs. When the job stops it
// says "job stopped"; on SIGUSR1 it continues the job's group (fg). It exits
// with the job's status.
func jobShell() int {
	var argv []string
	if err := json.Unmarshal([]byte(os.Getenv("JOB_ARGV")), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "jobshell: bad $JOB_ARGV")
		return 2
	}
	fg := make(chan os.Signal, 1)
	signal.Notify(fg, syscall.SIGUSR1)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "RETRY_TEST_CHILD=signals") // the job's command: the test binary as a signals child
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
	fmt.Printf("ready %d %d\n", os.Getpid(), syscall.Getpgrp())
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "jobshell:", err)
		return 2
	}
	pid := cmd.Process.Pid
	fmt.Printf("job %d\n", pid)
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil); err == syscall.EINTR {
			continue // SIGUSR1
		} else if err != nil {
			return 2
		}
		switch {
		case ws.Stopped():
			fmt.Println("job stopped")
			<-fg
			syscall.Kill(-pid, syscall.SIGCONT)
		case ws.Exited():
			return ws.ExitStatus()
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
	}
}

// testChild runs the test binary as a child command of retry (see TestMain):
// mode "signals" reports "ready PID PGID", then one "sig NAME" line per
// SIGINT, SIGTERM, SIGHUP or SIGQUIT received, and exits 3 on a signal named in
// $EXIT_ON (it ignores the others).
func testChild(mode string) int {
	switch mode {
	case "jobshell":
		return jobShell()
	case "fgcheck": // what proc.TerminalForeground says, after a ready line
		fmt.Printf("ready %d %d\nforeground %v\n", os.Getpid(), syscall.Getpgrp(), proc.TerminalForeground())
		return 0
	}
	if mode != "signals" {
		fmt.Fprintf(os.Stderr, "unknown test child mode %q\n", mode)
		return 2
	}
	c := make(chan os.Signal, 16)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	fmt.Printf("ready %d %d\n", os.Getpid(), syscall.Getpgrp())
	names := map[os.Signal]string{syscall.SIGINT: "INT", syscall.SIGTERM: "TERM", syscall.SIGHUP: "HUP", syscall.SIGQUIT: "QUIT"}
	for s := range c {
		fmt.Printf("sig %s\n", names[s])
		if strings.Contains(os.Getenv("EXIT_ON"), names[s]) {
			return 3
		}
	}
	return 0
}
