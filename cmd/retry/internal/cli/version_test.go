package cli

import (
	"runtime/debug"
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
		if got := VersionOf(tc.bi); got != tc.want {
			t.Errorf("%s: versionOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}
