package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// The docs check (issue 29): every retry command line in the code blocks of
// README.md and docs/*.md is in docCommands, which says how the test runs
// it (loopback only) and the exit code it asserts, or why it cannot run
// here. A command in the docs that is in neither fails the test, and so does
// an entry of docCommands that no doc holds any more.

// docCommand says how the docs check runs one command line of the docs.
type docCommand struct {
	// skip, if not "", is why the command is not run: it needs a host, a
	// secret or a file the test cannot stand in for.
	skip string
	// run, if not "", is the command line run instead of the doc's (with
	// retry on PATH), with the reason in why: a smaller size where the
	// doc's own command takes more than about 10 s.
	run, why string
	// files are written into the working directory before the run.
	files map[string]string
	// exit is the exit code asserted.
	exit int
	// want, if not "", must be in the output (stdout and stderr).
	want string
	// slow marks a command that runs for seconds (demo, sims): it runs
	// beside the others (t.Parallel).
	slow bool
}

// A deploy.sh, an ask.sh, a Makefile whose test passes, and the request.
var (
	okScript = map[string]string{"deploy.sh": "#!/bin/sh\necho deployed\n", "ask.sh": "#!/bin/sh\necho asked\n"}
	makefile = map[string]string{"Makefile": "test:\n\t@echo passed\n"}
	reqJSON  = map[string]string{"req.json": `{"contents":[{"parts":[{"text":"hi"}]}]}`}
)

// docCommands are the retry command lines of the docs, as written there (a
// "go run ./cmd/retry" prefix is "retry", a "# comment" and a "$ " prompt
// are left out). In a command that runs, https://host is the test's
// loopback server, redis://127.0.0.1:6379 the test's redis-server, out/ and
// docs/img a temporary directory, and $KEY a dummy key.
var docCommands = map[string]docCommand{
	"retry demo": {exit: 0, want: "give-ups", slow: true},
	"retry --deadline 300s --attempts 8 -- ./deploy.sh":                                         {files: okScript, exit: 0, want: "deployed"},
	"retry --on-exit-codes 2 --attempt-timeout 30s -- make test":                                {files: makefile, exit: 0, want: "passed"},
	`retry http -fsS -H "x-goog-api-key: $KEY" 'https://host/v1/models'`:                        {exit: 0, want: `"models"`},
	"retry http --json @req.json --idempotency-key auto URL":                                    {files: reqJSON, exit: 0, want: `"models"`},
	"retry http --json @req.json 'https://host/v1beta/models/gemini-2.5-flash:generateContent'": {files: reqJSON, exit: 0, want: `"models"`},
	"retry --redis redis://127.0.0.1:6379/0 --fleet gemini --quota 600/1m -- ./ask.sh":          {files: okScript, exit: 0, want: "asked"},
	"retry sim contention --clients 10:190:10 --plot out/": {run: "retry sim contention --clients 10:50:20 --plot out/",
		why: "the doc's range takes 5 s, and more than 30 s in a race-enabled build beside CPU burners: 3 sizes, same flags", exit: 0, want: "wrote out/contention-calls.svg", slow: true},
	"retry sim overload":              {exit: 0, want: "Conclusion", slow: true},
	"retry sim fleet --plot out/":     {exit: 0, want: "wrote out/fleetsim-load.svg", slow: true},
	"retry sim fleet --plot docs/img": {exit: 0, want: "wrote docs/img/fleetsim-load.svg", slow: true},
	"retry --redis redis://127.0.0.1:6379/0 --fleet myproject:gemini-2.5-flash --quota 600/1m -- ./ask.sh":                                                         {files: okScript, exit: 0, want: "asked"},
	`retry http --redis redis://127.0.0.1:6379/0 --fleet myproject:gemini-2.5-flash --quota 600/1m -fsS -H "x-goog-api-key: $KEY" 'https://host/v1/models'`:        {exit: 0, want: `"models"`},
	"retry --config ci-retry.json -- make integration-test":                                                                                                        {skip: "its ci-retry.json (docs/fleet.md) names the Redis host ci-redis and its password, and the project's make integration-test"},
	"retry sim overload --strategies none,genai,token-bucket,ratio-budget,adaptive-throttle,budget+throttle,profile:standard,profile:priority,profile:provisioned": {exit: 0, want: "profile:provisioned", slow: true},
	"retry sim overload --drop --strategies none,genai,token-bucket,ratio-budget,profile:priority":                                                                 {exit: 0, want: "profile:priority", slow: true},
}

// docComment, goRun and retryLine normalise and find a command line of
// the docs.
var (
	docComment = regexp.MustCompile(`\s+#\s.*$`)
	goRun      = regexp.MustCompile(`^go run \./cmd/retry( |$)`)
	retryLine  = regexp.MustCompile(`^retry( |$)`)
)

// docCommandLines returns the retry command lines in the code blocks of the
// README and docs/*.md (continued lines joined), by the file that holds
// each.
func docCommandLines(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	found := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var block bool
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				block = !block
				continue
			}
			if !block {
				continue
			}
			l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
			l = goRun.ReplaceAllString(l, "retry$1")
			if !retryLine.MatchString(l) {
				continue
			}
			for strings.HasSuffix(l, `\`) && sc.Scan() {
				l = strings.TrimSpace(strings.TrimSuffix(l, `\`)) + " " + strings.TrimSpace(sc.Text())
			}
			l = strings.TrimSpace(docComment.ReplaceAllString(l, ""))
			l = strings.Join(strings.Fields(l), " ")
			found[l] = append(found[l], filepath.Base(f))
		}
	}
	return found
}

// docServer answers every request 200 with a small JSON body.
func docServer(t *testing.T) string {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"models": []}` + "\n"))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestDocCommands(t *testing.T) {
	found := docCommandLines(t)
	if len(found) < 10 {
		t.Fatalf("found %d command lines in the docs: the extraction is broken", len(found))
	}
	var lines []string
	for l := range found {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	for _, l := range lines {
		if _, ok := docCommands[l]; !ok {
			t.Errorf("%v: the command %q is in no list of docCommands (docs_test.go): say how to run it, or why it cannot run", found[l], l)
		}
	}
	for l := range docCommands {
		if _, ok := found[l]; !ok {
			t.Errorf("docCommands lists %q, which no doc holds any more", l)
		}
	}

	path := t.TempDir() // retry on PATH, as a newcomer has it
	if raceEnabled {
		// The docs' sims run 20 to 100 times slower in a race-enabled
		// binary (sim overload: 100-200 s beside the others): the docs are
		// checked with the binary a newcomer builds. The race detector
		// runs on the same code in the other tests.
		if out, err := exec.Command("go", "build", "-o", filepath.Join(path, "retry"), ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	} else if err := os.Symlink(bin, filepath.Join(path, "retry")); err != nil {
		t.Fatal(err)
	}
	server := docServer(t)
	redisURL := startRedis(t).url()
	for _, l := range lines {
		dc, ok := docCommands[l]
		if !ok || dc.skip != "" {
			continue
		}
		t.Run(strings.Join(strings.Fields(l)[:min(3, len(strings.Fields(l)))], "_"), func(t *testing.T) {
			if dc.slow {
				t.Parallel()
			}
			run := l
			if dc.run != "" {
				run = dc.run
			}
			run = strings.ReplaceAll(run, "https://host", server)
			run = strings.ReplaceAll(run, " URL", " "+server+"/v1/orders")
			run = strings.ReplaceAll(run, "redis://127.0.0.1:6379/0", redisURL)
			dir := t.TempDir()
			for name, body := range dc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", run)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+path+":"+os.Getenv("PATH"), "KEY=test-key")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.WaitDelay = 5 * time.Second
			err := cmd.Run()
			if code := shellStatus(err); code != dc.exit || !strings.Contains(out.String(), dc.want) {
				t.Errorf("%s (from %v)\nran %s\nexit %d, want %d and %q in the output:\n%s", l, found[l], run, code, dc.exit, dc.want, out.String())
			}
			if strings.Contains(out.String(), "unavailable") {
				t.Errorf("%s: the fleet's Redis was unavailable:\n%s", l, out.String())
			}
		})
	}
}
