package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeExample runs the README's and the manual's make example (issue
// 29 item 2) on a Makefile whose recipe fails once with exit 1: GNU make
// then exits 2, so --on-exit-codes 2 retries it and the second attempt
// passes; the example as it was (--on-exit-codes 1,75) never retried.
// Without make on the machine, a sh script that exits as make does
// stands in for it.
func TestMakeExample(t *testing.T) {
	makeCmd := []string{"make", "test"}
	if _, err := exec.LookPath("make"); err != nil {
		makeCmd = []string{"sh", "-c", `if [ -e ran ]; then echo passed; else touch ran; echo "make: *** [Makefile:2: test] Error 1" >&2; exit 2; fi`}
	}
	for _, tc := range []struct {
		codes    string
		exit     int
		attempts int
	}{
		{"2", 0, 2},
		{"1,75", 2, 1},
	} {
		dir := t.TempDir()
		mk := "test:\n\t@if [ -e ran ]; then echo passed; else touch ran; exit 1; fi\n"
		if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk), 0o600); err != nil {
			t.Fatal(err)
		}
		r := runRetryInDir(t, dir, append([]string{"--on-exit-codes", tc.codes, "--attempt-timeout", "30s", "--initial-delay", "10ms", "--"}, makeCmd...)...)
		if r.code != tc.exit || len(lines(r.stderr, "attempt ")) != tc.attempts || (tc.exit == 0 && r.stdout != "passed\n") {
			t.Errorf("--on-exit-codes %s: exit %d, stdout %q, want exit %d after %d attempts; stderr:\n%s", tc.codes, r.code, r.stdout, tc.exit, tc.attempts, r.stderr)
		}
		if tc.exit == 2 && !strings.Contains(r.stderr, "exit code 2") {
			t.Errorf("--on-exit-codes %s: stderr does not say make exited 2:\n%s", tc.codes, r.stderr)
		}
	}
}
