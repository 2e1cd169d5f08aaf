package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// The tool service runs in a separate OS process: the test binary started
// again with serviceEnv set, so TestMain serves tools instead of testing.
const (
	serviceEnv     = "XMLACTION_TOOL_SERVICE"
	serviceURLEnv  = "XMLACTION_TOOL_SERVICE_NATS"
	releaseSubject = "xmltest.release"    // lets the cache write finish
	cacheDone      = "xmltest.cache.done" // published when it has
	statsSubject   = "xmltest.stats"      // how often secret_tool ran
	overlapTimeout = 10 * time.Second
)

// fetchBarrier makes the three fetch tools wait for each other: they
// answer only once all three requests are in flight, so a test that gets
// their results has proved that they overlapped.
type fetchBarrier struct {
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func (b *fetchBarrier) arrive() bool {
	b.mu.Lock()
	b.arrived++
	if b.arrived == 3 {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return true
	case <-time.After(overlapTimeout):
		return false
	}
}

// serveTools is the service process: the five tools of the Cortex complete
// example with fixture data, plus a failing and a secret tool, as one NATS
// micro service on interlingua.tool.<name>. It serves until stdin closes.
func serveTools() int {
	nc, err := nats.Connect(os.Getenv(serviceURLEnv), nats.Name("xmlaction-test-tools"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 1
	}
	defer nc.Close()
	svc, err := micro.AddService(nc, micro.Config{Name: "xmlaction_test_tools", Version: "1.0.0", Description: "fixture tools"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "service:", err)
		return 1
	}
	barrier := &fetchBarrier{all: make(chan struct{})}
	release := make(chan struct{})
	var releaseOnce sync.Once
	relSub, err := nc.Subscribe(releaseSubject, func(*nats.Msg) { releaseOnce.Do(func() { close(release) }) })
	if err != nil {
		return 1
	}
	defer relSub.Unsubscribe()
	var secretCalls atomic.Int64
	statsSub, err := nc.Subscribe(statsSubject, func(m *nats.Msg) { _ = m.Respond([]byte(fmt.Sprint(secretCalls.Load()))) })
	if err != nil {
		return 1
	}
	defer statsSub.Unsubscribe()

	fetch := func(result any) micro.HandlerFunc {
		return func(req micro.Request) {
			if !barrier.arrive() {
				_ = req.Error("504", "the three fetches did not overlap", nil)
				return
			}
			var in map[string]any
			_ = json.Unmarshal(req.Data(), &in)
			_ = req.RespondJSON(map[string]any{"input": in, "result": result})
		}
	}
	tools := map[string]micro.HandlerFunc{
		"web_scraper": fetch(map[string]any{"title": "Artificial intelligence", "words": 12000}),
		"arxiv_search": fetch([]any{
			map[string]any{"title": "Attention Is All You Need"},
			map[string]any{"title": "Scaling Laws"},
		}),
		"news_api": fetch([]any{"EU AI Act passes", "New multimodal model"}),
		"comprehensive_analyzer": func(req micro.Request) {
			// The inputs arrive typed ($wiki_data is the scraper's object).
			var in struct {
				Wikipedia struct {
					Result struct{ Title string } `json:"result"`
				} `json:"wikipedia"`
				Papers struct {
					Result []map[string]any `json:"result"`
				} `json:"research_papers"`
				News struct {
					Result []string `json:"result"`
				} `json:"news"`
			}
			if err := json.Unmarshal(req.Data(), &in); err != nil || in.Wikipedia.Result.Title == "" {
				_ = req.Error("400", fmt.Sprintf("analyzer: bad input %s", req.Data()), nil)
				return
			}
			_ = req.RespondJSON(fmt.Sprintf("ANALYSIS: %s; %d papers; %d news items",
				in.Wikipedia.Result.Title, len(in.Papers.Result), len(in.News.Result)))
		},
		"results_cache": func(req micro.Request) {
			select {
			case <-release:
			case <-time.After(time.Minute):
			}
			var in struct {
				Key   string `json:"key"`
				Value string `json:"value"`
			}
			_ = json.Unmarshal(req.Data(), &in)
			_ = req.RespondJSON(map[string]any{"stored": in.Key})
			_ = nc.Publish(cacheDone, []byte(in.Value))
		},
		"failing_tool": func(req micro.Request) { _ = req.Error("503", "backend down", nil) },
		"secret_tool": func(req micro.Request) {
			secretCalls.Add(1)
			_ = req.RespondJSON("leaked")
		},
	}
	for name, h := range tools {
		if err := svc.AddEndpoint(name, h, micro.WithEndpointSubject("interlingua.tool."+name)); err != nil {
			fmt.Fprintln(os.Stderr, "endpoint:", err)
			return 1
		}
	}
	if err := nc.Flush(); err != nil {
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test closes stdin
	_ = svc.Stop()
	return 0
}

// startToolService starts the service process against the NATS server at
// url and waits until it serves.
func startToolService(t *testing.T, url string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serviceEnv+"=1", serviceURLEnv+"="+url)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Our own pipe (not StdoutPipe), read by our goroutine until the
	// process exits, so Wait never races the reader.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	ready := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		line, _ := bufio.NewReader(pr).ReadString('\n')
		ready <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tool service: %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("tool service did not stop")
		}
		<-drained
		_ = pr.Close()
	})
	select {
	case line := <-ready:
		if line != "ready" {
			t.Fatalf("tool service said %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tool service not ready within 30s")
	}
}
