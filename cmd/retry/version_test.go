package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionShowsRevision builds retry from a git checkout with VCS
// stamping on and checks that --version names the commit.
func TestVersionShowsRevision(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds retry from a clone (a few seconds; the -race run skips it)")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("git rev-parse HEAD: ", err)
	}
	// A clone, not the worktree: the go command does not stamp a git
	// worktree (its .git is a file).
	clone := filepath.Join(t.TempDir(), "repo")
	if out, err := exec.Command("git", "clone", "-q", "--no-checkout", strings.TrimSpace(string(root)), clone).CombinedOutput(); err != nil {
		t.Skipf("git clone: %v\n%s", err, out)
	}
	if out, err := exec.Command("git", "-C", clone, "checkout", "-q", strings.TrimSpace(string(head))).CombinedOutput(); err != nil {
		t.Fatalf("git checkout: %v\n%s", err, out)
	}
	exe := filepath.Join(t.TempDir(), "retry")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", exe, ".")
	build.Dir = filepath.Join(clone, "cmd", "retry")
	build.Env = append(os.Environ(), "GOWORK="+filepath.Join(clone, "go.work"), "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(exe, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), string(head[:12])) {
		t.Errorf("--version = %q, want it to name the revision %s", out, head[:12])
	}
	t.Logf("--version: %s", out)
}
