package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionOf: --version shows the module version and, when the build
// recorded them, the VCS revision, its time and uncommitted changes.
func TestVersionOf(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "devel"},
		{"no stamp", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel"},
		{"go install @tag", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "v1.2.0"},
		{"devel with revision", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-30T20:30:00Z", "vcs.modified", "true")},
			"devel (revision 0123456789ab+dirty, 2026-11-30T20:30:00Z)"},
		{"tag with revision", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"},
			Settings: vcs("vcs.revision", rev, "vcs.modified", "false")}, "v1.2.0 (revision 0123456789ab)"},
		{"pseudo-version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.1-0.20261130203000-0123456789ab+dirty"},
			Settings: vcs("vcs.revision", rev, "vcs.modified", "true")}, "v1.2.1-0.20261130203000-0123456789ab+dirty"},
	} {
		if got := versionOf(tc.bi); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

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
