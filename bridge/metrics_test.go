package bridge_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// Each Server has its own registry: two in one process each report only
// their own runs, events and published bytes (a process-wide registry
// showed the first server's gauges and the sum of both servers' counts).
func TestMetricsPerServer(t *testing.T) {
	a, b := bridgetest.Start(t, nil), bridgetest.Start(t, nil)
	echoRun(t, a.URL)
	for range 3 {
		echoRun(t, b.URL)
	}
	ma, mb := scrapeMetrics(t, a.URL), scrapeMetrics(t, b.URL)
	const runs = `interlingua_runs_total{backend="scripted",code="ok",frontend="native",outcome="completed",target="echo"}`
	if got := metricValue(t, ma, runs); got != 1 {
		t.Errorf("first server: %s %v, want 1", runs, got)
	}
	if got := metricValue(t, mb, runs); got != 3 {
		t.Errorf("second server: %s %v, want 3", runs, got)
	}
	// Each run publishes its events: the second server, with three runs
	// of the same events, has published about three times the first's
	// bytes (not exactly: the replay log's batches may group them apart).
	const bytes = "interlingua_nats_published_bytes_total"
	if pa, pb := metricValue(t, ma, bytes), metricValue(t, mb, bytes); pa <= 0 || pb < 2*pa {
		t.Errorf("%s: first %v, second %v, want the second over twice the first (> 0)", bytes, pa, pb)
	}
	for _, m := range []string{ma, mb} {
		if got := metricValue(t, m, "interlingua_runs_in_flight"); got != 0 {
			t.Errorf("interlingua_runs_in_flight %v after the runs ended, want 0", got)
		}
	}
}

// echoRun runs the scripted echo target through the native frontend and
// reads the stream to its end.
func echoRun(t *testing.T, base string) {
	t.Helper()
	body := `{"target":"echo","inputs":[{"name":"prompt","node":{"data":"aGk="}}]}`
	resp, err := http.Post(base+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(out), "RUN_STATUS_COMPLETED") {
		t.Fatalf("run: %d %s", resp.StatusCode, out)
	}
}

func scrapeMetrics(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out)
}

// metricValue is the value of the exposition line for series (a name with
// its labels, as written); the test fails if there is none.
func metricValue(t *testing.T, exposition, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(exposition)
	if m == nil {
		t.Fatalf("no %s in /metrics", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", series, err))
	}
	return v
}
