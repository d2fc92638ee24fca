// Command modproxy writes a file-based Go module proxy (the GOPROXY
// protocol's layout, served with GOPROXY=file://DIR) holding the modules of
// this repository that a main module needs, at one test version, so that
// "go install MODULE/cmd@VERSION" can be tried without the network and
// before anything is tagged.
//
// Usage, from the repository's root:
//
//	go run ./scripts/modproxy -out DIR -version v0.0.0-test cmd/retry
//
// It starts from the named module's directory and follows its requirements
// on modules of this repository (paths under the root go.mod's module
// path), transitively. Each one is copied as the working tree has it
// (nested modules left out, as a module zip leaves them out), with its
// requirements on the repository's modules rewritten to the test version,
// and zipped with golang.org/x/mod/zip (which checks what the go command
// checks: paths, sizes, file kinds). Its replace directives are kept as
// they are: the go command, not this tool, refuses a main module that has
// them.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	out := flag.String("out", "", "the proxy's directory (created)")
	version := flag.String("version", "v0.0.0-test", "the version every module of the repository gets")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: modproxy -out DIR [-version V] MODULE-DIR (from the repository's root)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	mods, err := build(".", flag.Arg(0), *out, *version)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
	for _, m := range mods {
		fmt.Printf("%s@%s\n", m, *version)
	}
}

// build writes the proxy for the module in root/start and the repository's
// modules it needs; it returns their paths, start's first.
func build(root, start, out, version string) ([]string, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return nil, fmt.Errorf("-version %q: not a canonical semantic version (such as v0.0.0-test)", version)
	}
	rootPath, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	// dirOf maps a module path of the repository to its directory.
	dirOf := func(p string) (string, bool) {
		if p == rootPath {
			return root, true
		}
		if rel, ok := strings.CutPrefix(p, rootPath+"/"); ok {
			return filepath.Join(root, filepath.FromSlash(rel)), true
		}
		return "", false
	}
	stage, err := os.MkdirTemp("", "modproxy-stage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	var done []string
	seen := map[string]bool{}
	queue := []string{filepath.Clean(filepath.Join(root, start))}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(filepath.Join(dir, "go.mod"), data, nil)
		if err != nil {
			return nil, err
		}
		if f.Module == nil {
			return nil, fmt.Errorf("%s/go.mod: no module line", dir)
		}
		mp := f.Module.Mod.Path
		if seen[mp] {
			continue
		}
		seen[mp] = true
		for _, r := range f.Require {
			if d, ok := dirOf(r.Mod.Path); ok {
				if err := f.AddRequire(r.Mod.Path, version); err != nil {
					return nil, err
				}
				queue = append(queue, filepath.Clean(d))
			}
		}
		gomod, err := f.Format()
		if err != nil {
			return nil, err
		}
		copyDir := filepath.Join(stage, strings.ReplaceAll(mp, "/", "_"))
		if err := copyModule(dir, copyDir); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(copyDir, "go.mod"), gomod, 0o644); err != nil {
			return nil, err
		}
		if err := publish(out, mp, version, copyDir, gomod); err != nil {
			return nil, fmt.Errorf("%s: %w", mp, err)
		}
		done = append(done, mp)
	}
	return done, nil
}

// publish writes list, .info, .mod and .zip of path@version under out.
func publish(out, modPath, version, dir string, gomod []byte) error {
	esc, err := module.EscapePath(modPath)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	for name, data := range map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	z, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return err
	}
	if err := zip.CreateFromDir(z, module.Version{Path: modPath, Version: version}, dir); err != nil {
		z.Close()
		return err
	}
	return z.Close()
}

// copyModule copies the files of the module in src to dst: not the nested
// modules (directories with a go.mod of their own), nor hidden directories
// such as .git.
func copyModule(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." {
				if strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir
				}
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil // a module zip holds regular files only
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// modulePath returns the module path in the go.mod file at name.
func modulePath(name string) (string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return "", errors.New(name + ": no module line")
	}
	return path.Clean(p), nil
}
