package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version returns what retry was built from, as debug.ReadBuildInfo says.
func Version() string {
	bi, _ := debug.ReadBuildInfo()
	return VersionOf(bi)
}

// VersionOf returns the module version in bi (the tag when installed with
// "go install ...@vX.Y.Z" or built from a tagged checkout, a pseudo-version
// otherwise, "devel" when the go command stamped none) followed by the VCS
// revision, its time and "+dirty" for uncommitted changes when the build
// recorded them (go build -buildvcs, the default in a git checkout):
// "v1.2.0", "devel (revision 0123456789ab+dirty, 2026-11-30T20:30:00Z)".
func VersionOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "devel"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, when, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if strings.HasSuffix(strings.TrimSuffix(v, "+dirty"), rev) {
		return v // a pseudo-version already ends with the revision
	}
	v += " (revision " + rev + dirty
	if when != "" {
		v += ", " + when
	}
	return v + ")"
}

// VersionLine is what "retry --version" prints.
func VersionLine() string {
	return fmt.Sprintf("retry %s (github.com/backoffkit/retry, %s %s/%s)", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
