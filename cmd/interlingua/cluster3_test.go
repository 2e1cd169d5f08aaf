package main

// A real three-node NATS cluster on loopback, the deployment
// docker/compose.yaml describes, without Docker: two instances with
// nats.replicas 3, runs placed from one on the other, and one NATS node
// killed with SIGKILL mid-run.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// natsNode is one nats-server of a JetStream cluster on loopback.
type natsNode struct {
	bin, name, store  string
	addr, clusterAddr string // client and route listeners
	monitorAddr       string // HTTP monitoring (/jsz, /connz)
	routes            []string
	cmd               *exec.Cmd
	log               *syncBuffer
}

// startNATSCluster starts three clustered nats-server processes and waits
// until JetStream can create streams replicated on all three. The nine
// ports are chosen before any server starts, so one may be taken by then
// (a route's outgoing connection): the cluster is then started anew.
func startNATSCluster(t *testing.T) []*natsNode {
	t.Helper()
	bin := bridgetest.NATSServerBin(t)
	for try := 1; ; try++ {
		nodes := make([]*natsNode, 3)
		for i := range nodes {
			nodes[i] = &natsNode{bin: bin, name: fmt.Sprintf("n%d", i+1), store: t.TempDir(),
				addr: freeAddr(t), clusterAddr: freeAddr(t), monitorAddr: freeAddr(t), log: &syncBuffer{}}
		}
		for _, n := range nodes {
			for _, o := range nodes {
				if o != n {
					n.routes = append(n.routes, "nats://"+o.clusterAddr)
				}
			}
		}
		var err error
		for _, n := range nodes {
			t.Cleanup(n.kill)
			if err = n.start(); err != nil {
				break
			}
		}
		if err == nil {
			waitMetaLeader(t, nodes)
			waitReplicated(t, nodes)
			return nodes
		}
		for _, n := range nodes {
			n.kill()
		}
		if try == 3 {
			t.Fatal(err)
		}
	}
}

func (n *natsNode) start() error {
	host, port, _ := strings.Cut(n.addr, ":")
	_, mport, _ := strings.Cut(n.monitorAddr, ":")
	n.cmd = exec.Command(n.bin, "-a", host, "-p", port, "-m", mport, "-js", "-sd", n.store,
		"--server_name", n.name, "--cluster_name", "interlingua-test",
		"--cluster", "nats://"+n.clusterAddr, "--routes", strings.Join(n.routes, ","))
	n.cmd.Stderr = n.log
	if err := n.cmd.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := netDial(n.addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("nats-server %s did not listen within 10s:\n%s", n.name, tail(n.log.String()))
}

// kill ends the server with SIGKILL: no goodbye to its routes or clients.
func (n *natsNode) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

func natsURLs(nodes []*natsNode) string {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = "nats://" + n.addr
	}
	return strings.Join(urls, ",")
}

// monitor GETs a monitoring endpoint of n and decodes its JSON into v.
func (n *natsNode) monitor(path string, v any) error {
	resp, err := client.Get("http://" + n.monitorAddr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %s", n.name, path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// metaLeader is the JetStream meta leader n knows of and, when n is the
// leader, the servers it sees current (followers know nothing of that).
func metaLeader(n *natsNode) (leader string, current map[string]bool) {
	var jsz struct {
		Meta struct {
			Leader   string `json:"leader"`
			Replicas []struct {
				Name    string `json:"name"`
				Current bool   `json:"current"`
			} `json:"replicas"`
		} `json:"meta_cluster"`
	}
	if n.monitor("/jsz", &jsz) != nil {
		return "", nil
	}
	current = map[string]bool{}
	for _, r := range jsz.Meta.Replicas {
		current[r.Name] = r.Current
	}
	return jsz.Meta.Leader, current
}

// waitMetaLeader waits until the nodes agree on a JetStream meta leader
// among them (the survivors of a kill still name the dead one until they
// elect another, after 4 to 9 s) which sees the others current. The bound
// is nats-server's, not ours: under CI's load (the race-built packages
// testing beside it) an election with its catch-up took more than 20 s.
func waitMetaLeader(t *testing.T, nodes []*natsNode) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !metaLeaderAmong(nodes) {
		if time.Now().After(deadline) {
			var seen []string
			for _, n := range nodes {
				l, current := metaLeader(n)
				seen = append(seen, fmt.Sprintf("%s names %q, sees current %v", n.name, l, current))
			}
			t.Fatalf("the NATS cluster elected no JetStream meta leader within 60s: %s", strings.Join(seen, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitReplicated waits until a stream with one replica per node can be
// created, as the daemons' will be: a meta leader alone is not enough.
func waitReplicated(t *testing.T, nodes []*natsNode) {
	t.Helper()
	nc, js := jsConnect(t, nodes[0])
	defer nc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "PROBE", Subjects: []string{"probe"}, Replicas: len(nodes)})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream with %d replicas could be created within 20s: %v", len(nodes), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, "PROBE"); err != nil {
		t.Fatal(err)
	}
}

// metaLeaderAmong reports whether the nodes agree on a meta leader among
// them which sees every other one of them current.
func metaLeaderAmong(nodes []*natsNode) bool {
	var leader *natsNode
	var current map[string]bool
	for _, n := range nodes {
		l, c := metaLeader(n)
		if leader != nil && l != leader.name {
			return false
		}
		for _, m := range nodes {
			if m.name == l {
				leader = m
			}
		}
		if leader == nil {
			return false
		}
		if n == leader {
			current = c
		}
	}
	for _, n := range nodes {
		if n != leader && !current[n.name] {
			return false
		}
	}
	return true
}

// nodeOf returns the node that holds d's main NATS connection (the one
// named "interlingua", which carries its runs' events): the connection
// whose client port is one of d's sockets. nats.go picks a server of the
// URL list at random, so the test has to look.
func nodeOf(t *testing.T, d *daemon, nodes []*natsNode) *natsNode {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ports, err := socketPorts(d.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			var connz struct {
				Conns []struct {
					Name string `json:"name"`
					Port int    `json:"port"`
				} `json:"connections"`
			}
			if n.monitor("/connz?limit=4096", &connz) != nil {
				continue
			}
			for _, c := range connz.Conns {
				if c.Name == "interlingua" && ports[c.Port] {
					return n
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("found no NATS node holding the daemon's connection")
	return nil
}

// socketPorts returns the local ports of the IPv4 TCP sockets process pid
// holds (Linux /proc: the socket inodes of its descriptors, looked up in
// /proc/net/tcp).
func socketPorts(pid int) (map[int]bool, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, _ := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if ino, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	tab, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil, err
	}
	ports := map[int]bool{}
	for _, line := range strings.Split(string(tab), "\n")[1:] {
		f := strings.Fields(line) // sl local_address rem_address st ... uid timeout inode
		if len(f) < 10 || !inodes[f[9]] {
			continue
		}
		_, hexPort, _ := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil {
			ports[int(p)] = true
		}
	}
	return ports, nil
}

// placeLeaders moves the raft leader of every JetStream stream (the replay
// stream, the thread bucket's, any other the daemons made) to a server
// chosen by pick from its current leader, and waits until every replica is
// current, so that the kill that follows meets a known layout.
func placeLeaders(t *testing.T, via *natsNode, pick func(leader string) string) {
	t.Helper()
	nc, js := jsConnect(t, via)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	streams := streamNames(t, ctx, js)
	for _, want := range []string{bridge.EventsStream, "KV_" + bridge.ThreadsBucket} {
		if !slices.Contains(streams, want) {
			t.Fatalf("stream %s missing (streams: %v)", want, streams)
		}
	}
	for _, s := range streams {
		if err := placeLeader(ctx, nc, js, s, pick); err != nil {
			t.Fatalf("stream %s: %v", s, err)
		}
	}
}

// waitStreamLeaders waits until every stream has a leader other than the
// dead server: after a leader's death the survivors elect another after
// JetStream's raft election timeout (4 to 9 s); meanwhile the stream
// stores nothing and answers no reads.
func waitStreamLeaders(t *testing.T, via *natsNode, dead string) {
	t.Helper()
	nc, js := jsConnect(t, via)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range streamNames(t, ctx, js) {
		for {
			// Each ask with its own deadline: one sent while no leader
			// answers is never answered.
			askCtx, cancelAsk := context.WithTimeout(ctx, time.Second)
			st, err := js.Stream(askCtx, s)
			cancelAsk()
			if err == nil && st.CachedInfo().Cluster != nil {
				if l := st.CachedInfo().Cluster.Leader; l != "" && l != dead {
					break
				}
			}
			if ctx.Err() != nil {
				t.Fatalf("stream %s has no leader but %s 20s after its death (%v)", s, dead, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func jsConnect(t *testing.T, n *natsNode) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect("nats://" + n.addr)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	return nc, js
}

func streamNames(t *testing.T, ctx context.Context, js jetstream.JetStream) []string {
	t.Helper()
	for ctx.Err() == nil {
		askCtx, cancelAsk := context.WithTimeout(ctx, time.Second)
		names := js.StreamNames(askCtx)
		var streams []string
		for s := range names.Name() {
			streams = append(streams, s)
		}
		err := names.Err()
		cancelAsk()
		if err == nil {
			return streams
		}
		time.Sleep(50 * time.Millisecond) // no meta leader yet
	}
	t.Fatal("no stream list within 20s")
	return nil
}

// placeLeader asks the stream's leader to step down in favour of the
// chosen server until it leads and every replica is current.
func placeLeader(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, stream string, pick func(string) string) error {
	want, asked, last := "", time.Time{}, ""
	for ctx.Err() == nil {
		askCtx, cancelAsk := context.WithTimeout(ctx, time.Second)
		st, err := js.Stream(askCtx, stream)
		cancelAsk()
		if err != nil {
			last = err.Error()
			continue
		}
		cl := st.CachedInfo().Cluster
		if cl == nil || len(cl.Replicas) != 2 {
			return fmt.Errorf("not replicated 3 times: %+v", cl)
		}
		if want == "" {
			want = pick(cl.Leader)
		}
		current := cl.Replicas[0].Current && cl.Replicas[1].Current
		if cl.Leader == want && current {
			return nil
		}
		// One request per election: a leader asked again while its
		// successor takes over would only start another.
		if cl.Leader != want && cl.Leader != "" && time.Since(asked) > 3*time.Second {
			req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, want)
			resp, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(req), time.Second)
			if err == nil {
				last = string(resp.Data)
			}
			asked = time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("leader not moved to %s (last answer %s): %w", want, last, ctx.Err())
}

// liveRun is one run as its client reads it, on its own goroutine.
type liveRun struct {
	thread, prompt string
	events         []*canonical.Event
	err            error
	done           chan struct{}
}

// startRun posts an echo run of prompt on base (one text delta per word,
// delay before each) and reads it; progress is told once the client has
// read 100 events, so the kill lands mid-run.
func startRun(ctx context.Context, t *testing.T, base, thread, prompt string, delay time.Duration, progress *sync.WaitGroup) *liveRun {
	t.Helper()
	body := fmt.Sprintf(`{"target":"echo","threadId":%q,"parameters":{"delay_ms":%d},"inputs":[{"name":"prompt","node":{"data":%q}}]}`,
		thread, delay.Milliseconds(), base64.StdEncoding.EncodeToString([]byte(prompt)))
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/runs", strings.NewReader(body))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("POST /v1/runs: %s", resp.Status)
	}
	r := &liveRun{thread: thread, prompt: prompt, done: make(chan struct{})}
	progress.Add(1)
	go func() {
		defer close(r.done)
		defer resp.Body.Close()
		told := false
		r.events, r.err = readRun(bufio.NewScanner(resp.Body), func(n int) {
			if n == 100 && !told {
				told = true
				progress.Done()
			}
		})
		if !told {
			progress.Done()
		}
	}()
	return r
}

// readRun reads NDJSON canonical events up to and including the run's
// terminal event, calling seen with the count after each.
func readRun(sc *bufio.Scanner, seen func(n int)) ([]*canonical.Event, error) {
	var out []*canonical.Event
	for sc.Scan() {
		ev := &canonical.Event{}
		if err := protojson.Unmarshal(sc.Bytes(), ev); err != nil {
			return out, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		out = append(out, ev)
		seen(len(out))
		if _, ok := canonical.TerminalOf(ev); ok {
			return out, nil
		}
	}
	return out, fmt.Errorf("stream ended after %d events without a terminal event (%v)", len(out), sc.Err())
}

// replay reads a thread's events from seq 0 on base, to the terminal
// event. A replay refused as unavailable, not answered, or answered with
// no event at all is asked again for up to 20 s and logged: in the
// seconds after a kill -9 the meta leader may place the replay's consumer
// on the dead server (not yet known offline), and the creation times out
// (503) or nats.go's ordered consumer retries it without end (no event).
// A replay that returns events is never retried away.
func replay(t *testing.T, base, thread string) ([]*canonical.Event, error) {
	t.Helper()
	start := time.Now()
	for {
		evs, retry, err := replayOnce(base, thread)
		if !retry || time.Since(start) > 20*time.Second {
			return evs, err
		}
		t.Logf("thread %s, replay on %s unavailable %v after the first ask: %v", thread, base, time.Since(start).Round(time.Millisecond), err)
		time.Sleep(200 * time.Millisecond)
	}
}

func replayOnce(base, thread string) (evs []*canonical.Event, retry bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/threads/"+thread+"/events?since=0", nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, true, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, resp.StatusCode == http.StatusServiceUnavailable, fmt.Errorf("GET events: %s %s", resp.Status, b)
	}
	evs, err = readRun(bufio.NewScanner(resp.Body), func(int) {})
	return evs, len(evs) == 0, err
}

// checkRun asserts what a client must see: the run completed, the events
// form a valid run, seqs 1, 2, 3... with no gap, and the text deltas
// spell the prompt, in order.
func checkRun(evs []*canonical.Event, prompt string) error {
	if err := checkSeqs(evs); err != nil {
		return err
	}
	var text strings.Builder
	for _, ev := range evs {
		text.WriteString(ev.GetBlockDelta().GetText())
	}
	if text.String() != prompt {
		return fmt.Errorf("text deltas spell %d bytes, want the %d-byte prompt", text.Len(), len(prompt))
	}
	return nil
}

// checkSeqs asserts that evs are a valid, completed run with seqs 1, 2,
// 3... and names the missing ones.
func checkSeqs(evs []*canonical.Event) error {
	if len(evs) == 0 {
		return errors.New("no events")
	}
	var missing []string
	for i, ev := range evs {
		prev := uint64(0)
		if i > 0 {
			prev = evs[i-1].GetSeq()
		}
		switch seq := ev.GetSeq(); {
		case seq <= prev:
			return fmt.Errorf("event %d has seq %d after %d", i, seq, prev)
		case seq == prev+2:
			missing = append(missing, strconv.FormatUint(prev+1, 10))
		case seq > prev+2:
			missing = append(missing, fmt.Sprintf("%d-%d", prev+1, seq-1))
		}
	}
	if missing != nil {
		return fmt.Errorf("%d events, seqs missing: %s", len(evs), strings.Join(missing, ", "))
	}
	if err := canonical.Validate(evs); err != nil {
		return err
	}
	if st, _ := canonical.TerminalOf(evs[len(evs)-1]); st != canonical.StatusCompleted {
		return fmt.Errorf("run ended %v", evs[len(evs)-1])
	}
	return nil
}

// natsKill is one way to lose a NATS node: which node dies, relative to
// the two daemons' connections, and whether it leads the streams.
type natsKill struct {
	name string
	// victim picks the node to kill from the nodes holding the client
	// instance's and the owner instance's connections and the third one.
	victim func(client, owner, unused *natsNode) *natsNode
	// leads: the victim leads every stream's raft group (else none).
	leads bool
}

// TestCluster3NATSNodeKilled runs the compose deployment (three clustered
// nats-server processes, streams and KV replicated 3 times, one instance
// hosting the backend and one where the clients connect) and kills one
// NATS node with SIGKILL while runs stream: every run completes with
// every event, once, in order, and a replay from 0 on either instance
// returns the same events.
func TestCluster3NATSNodeKilled(t *testing.T) {
	unused := func(_, _, u *natsNode) *natsNode { return u }
	owners := func(_, o, _ *natsNode) *natsNode { return o }
	clients := func(c, _, _ *natsNode) *natsNode { return c }
	for _, k := range []natsKill{
		{name: "follower", victim: unused},
		{name: "owner-node", victim: owners},
		{name: "client-node", victim: clients},
		{name: "stream-leader", victim: unused, leads: true},
	} {
		t.Run(k.name, func(t *testing.T) {
			testNATSNodeKilled(t, k)
		})
	}
}

// natsKillSetup is a three-node cluster with its two instances, the client
// instance connected to another node than the owner.
type natsKillSetup struct {
	nodes                 []*natsNode
	cl, owner             *daemon
	clientNode, ownerNode *natsNode
	victim, survivor      *natsNode
}

func testNATSNodeKilled(t *testing.T, k natsKill) {
	c := setUpNATSKill(t)
	c.victim = k.victim(c.clientNode, c.ownerNode, c.unusedNode())
	c.survivor = c.ownerNode
	if c.victim == c.ownerNode {
		c.survivor = c.clientNode
	}
	placeLeaders(t, c.survivor, func(leader string) string {
		if k.leads {
			return c.victim.name
		}
		if leader != c.victim.name {
			return leader
		}
		return c.survivor.name
	})
	meta, _ := metaLeader(c.survivor)
	t.Logf("client instance on %s, owner on %s, meta leader %s, killing %s (leads the streams: %v)",
		c.clientNode.name, c.ownerNode.name, meta, c.victim.name, k.leads)
	runs := runAndKill(t, c.cl.base, c.victim)
	c.waitLeaders(t)
	for _, r := range runs {
		if r.err == nil {
			r.err = checkRun(r.events, r.prompt)
		}
		if r.err != nil {
			t.Errorf("thread %s, client: %v", r.thread, r.err)
			continue
		}
		for name, d := range map[string]*daemon{"client": c.cl, "owner": c.owner} {
			evs, err := replay(t, d.base, r.thread)
			if err == nil {
				err = sameEvents(evs, r.events)
			}
			if err != nil {
				t.Errorf("thread %s, replay on the %s instance: %v", r.thread, name, err)
			}
		}
	}
}

// setUpNATSKill starts the cluster and the instances with nats.replicas 3.
func setUpNATSKill(t *testing.T) *natsKillSetup {
	bin := buildBinary(t)
	c := &natsKillSetup{nodes: startNATSCluster(t)}
	urls := natsURLs(c.nodes)
	// The default heartbeat (1s; owner_timeout 3s), not startDaemon's
	// 100ms: owner_timeout also bounds a client instance's read of the
	// events its subscription missed from the replay log, which right
	// after a NATS server's death takes longer than 300ms.
	args := []string{"--set", "nats.replicas=3", "--set", "nats.heartbeat=1s"}
	c.owner = startDaemon(t, bin, urls, args...) // hosts every backend
	c.ownerNode = nodeOf(t, c.owner, c.nodes)
	for try := 0; ; try++ { // nats.go picks a server at random
		c.cl = startDaemon(t, bin, urls, append(args, "--host-backends", "none")...)
		if c.clientNode = nodeOf(t, c.cl, c.nodes); c.clientNode != c.ownerNode {
			break
		}
		if try == 10 {
			t.Fatal("the client instance always connects to the owner's node")
		}
		stopDaemon(c.cl)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("client instance's log:\n%s\nowner instance's log:\n%s", tail(c.cl.log.String()), tail(c.owner.log.String()))
		}
	})
	return c
}

func (c *natsKillSetup) unusedNode() *natsNode {
	for _, n := range c.nodes {
		if n != c.ownerNode && n != c.clientNode {
			return n
		}
	}
	return nil
}

// waitLeaders waits, after the kill, for the JetStream leaders the victim
// held (the meta leader's, a stream's) to be elected anew, which takes 4
// to 9 s: a replay makes a consumer, which needs both.
func (c *natsKillSetup) waitLeaders(t *testing.T) {
	start := time.Now()
	var survivors []*natsNode
	for _, n := range c.nodes {
		if n != c.victim {
			survivors = append(survivors, n)
		}
	}
	waitMetaLeader(t, survivors)
	waitStreamLeaders(t, c.survivor, c.victim.name)
	t.Logf("JetStream leaders in place %v after the runs ended", time.Since(start).Round(time.Millisecond))
}

// tail is the end of a daemon's log, its last warnings.
func tail(log string) string {
	const keep = 4096
	if len(log) > keep {
		return "..." + log[len(log)-keep:]
	}
	return log
}

func stopDaemon(d *daemon) {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

// runAndKill starts a few runs on base, kills the victim once each has
// streamed its first events, and waits for them to end.
func runAndKill(t *testing.T, base string, victim *natsNode) []*liveRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A delta every millisecond, so that events are in flight whenever a
	// connection breaks: at a delta every 25 ms a daemon's reconnect to
	// another server drops one only now and then.
	const runs, words, delay = 4, 1500, time.Millisecond
	var progress sync.WaitGroup
	var live []*liveRun
	for i := range runs {
		var prompt strings.Builder
		for w := range words {
			fmt.Fprintf(&prompt, " r%dw%03d", i, w)
		}
		thread := fmt.Sprintf("t3-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), i)
		live = append(live, startRun(ctx, t, base, thread, prompt.String(), delay, &progress))
	}
	progress.Wait()
	victim.kill()
	for _, r := range live {
		<-r.done
	}
	return live
}

// sameEvents compares a replay with what the client saw.
func sameEvents(got, want []*canonical.Event) error {
	if err := checkSeqs(got); err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d events, the client saw %d", len(got), len(want))
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			return fmt.Errorf("event %d differs:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	return nil
}
