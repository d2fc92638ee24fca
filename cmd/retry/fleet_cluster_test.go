package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoffkit/retry/cmd/retry/internal/cli"
	"github.com/redis/go-redis/v9"
)

// startCluster starts a Redis Cluster of three masters on free loopback
// ports (redis-server --cluster-enabled yes, redis-cli --cluster create) and
// returns its nodes once every node says cluster_state:ok. A node's failure
// is not detected for a minute (--cluster-node-timeout), so a master killed
// by a test leaves its slots unreachable while the others serve theirs.
func startCluster(t *testing.T) []*redisServer {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not found: install redis-tools to run the Redis Cluster test")
	}
	var nodes []*redisServer
	var addrs []string
	for range 3 {
		n := startRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "60000")
		nodes = append(nodes, n)
		addrs = append(addrs, n.addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		c := n.client(t, "")
		var info string
		var err error
		awaitState(ctx, t, func() string { return fmt.Sprintf("node %s: the cluster is not ok: %v %q", n.addr(), err, info) }, func() bool {
			info, err = c.ClusterInfo(ctx).Result()
			return err == nil && strings.Contains(info, "cluster_state:ok")
		})
	}
	return nodes
}

// lineReader sends the lines of r to a channel, and closes it at EOF.
func lineReader(r io.Reader) <-chan string {
	ch := make(chan string, 100)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}

// TestFleetCluster (issue 21 item 4): retry on a real 3-master Redis
// Cluster given as go-redis's cluster URL. One process runs a command that
// fails until the test lets it succeed; the master that holds the fleet's
// keys is killed mid-run: the process says once that Redis is unavailable,
// its attempts go on (decided by this process alone), and once the master
// is back it says Redis is available again and the fleet's keys are written
// there again.
func TestFleetCluster(t *testing.T) {
	nodes := startCluster(t)
	name := fleetName(t)
	url := "redis://" + nodes[0].addr() + "?addr=" + nodes[1].addr() + "&addr=" + nodes[2].addr()

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].addr()}})
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	master, err := cc.MasterForKey(ctx, "{"+name+"}:x")
	if err != nil {
		t.Fatal(err)
	}
	var owner *redisServer
	for _, n := range nodes {
		if n.addr() == master.Options().Addr {
			owner = n
		}
	}
	if owner == nil {
		t.Fatalf("no node at %s", master.Options().Addr)
	}
	fleetKeys := func() int {
		keys, err := owner.client(t, "").Keys(ctx, "{"+name+"}*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}

	stop := filepath.Join(t.TempDir(), "stop")
	// A --redis-timeout of 1s: a fresh process's first calls on a cluster
	// (the slots, a dial, the script) are bounded by it (see docs/fleet.md);
	// what is under test here is the failover, not that bound.
	cmd := exec.CommandContext(ctx, bin, args([]string{"--redis", url, "--fleet", name, "--quota", "100/1s", "--redis-timeout", "1s", "--attempts", "1000"},
		fast, []string{"--", "sh", "-c", `echo attempt; test -e "$STOP"`})...)
	cmd.Env = append(os.Environ(), "STOP="+stop)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	outs, errs := lineReader(stdout), lineReader(stderr)
	var log []string
	// await reads stdout for n attempts, and stderr (kept in log) until a
	// line holds want ("" for none).
	await := func(what string, n int, want string) {
		t.Helper()
		for n > 0 || want != "" {
			select {
			case _, ok := <-outs:
				if !ok {
					t.Fatalf("%s: retry ended; stderr:\n%s", what, strings.Join(log, "\n"))
				}
				n--
			case l, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				log = append(log, l)
				if want != "" && strings.Contains(l, want) {
					want = ""
				}
			case <-ctx.Done():
				t.Fatalf("%s: timed out; stderr:\n%s", what, strings.Join(log, "\n"))
			}
		}
	}
	await("before the kill", 3, "")
	if keys := fleetKeys(); keys == 0 {
		t.Errorf("before the kill: no key of fleet %s on its master %s", name, owner.addr())
	}
	owner.Kill()
	await("after the kill", 0, "unavailable")
	await("decided alone", 3, "")
	owner.Restart()
	await("after the restart", 0, "available again")
	await("back on Redis", 3, "")
	if keys := fleetKeys(); keys == 0 {
		t.Errorf("after the restart: no key of fleet %s on its master %s", name, owner.addr())
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for range outs {
	}
	for l := range errs {
		log = append(log, l)
	}
	err = cmd.Wait()
	if code := shellStatus(err); code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, strings.Join(log, "\n"))
	}
	if n := len(lines(strings.Join(log, "\n"), "unavailable")); n != 1 {
		t.Errorf("%d unavailable lines, want 1:\n%s", n, strings.Join(log, "\n"))
	}
}

func TestFleetClusterBadURL(t *testing.T) {
	r := runRetry(t, "", nil, "--redis", "redis://:s3cret@127.0.0.1:1?addr=127.0.0.1:2&bogus=1", "--fleet", "f", "--", "true")
	if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--redis: invalid Redis Cluster URL redis://REDACTED@127.0.0.1:1?addr=127.0.0.1:2&bogus=1: unexpected option: bogus") || strings.Contains(r.stderr, "s3cret") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
