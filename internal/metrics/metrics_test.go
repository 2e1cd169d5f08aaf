package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

// Two Metrics in one process share nothing: each handler serves its own
// counters and gauges, besides the process-wide Go collector.
func TestMetricsAreTheirOwn(t *testing.T) {
	a, b := New(), New()
	a.SlowConsumers.WithLabelValues("websocket").Inc()
	a.SlowConsumers.WithLabelValues("websocket").Inc()
	b.SlowConsumers.WithLabelValues("native").Inc()
	a.GaugeFunc("interlingua_test_gauge", "test", func() float64 { return 7 })
	b.GaugeFunc("interlingua_test_gauge", "test", func() float64 { return 8 })
	a.CounterFunc("interlingua_test_bytes_total", "test", func() float64 { return 1024 })

	got := scrape(t, a)
	for _, want := range []string{`interlingua_slow_consumer_cutoffs_total{protocol="websocket"} 2`, "interlingua_test_gauge 7", "interlingua_test_bytes_total 1024", "go_goroutines"} {
		if !strings.Contains(got, want) {
			t.Errorf("first /metrics lacks %q", want)
		}
	}
	if strings.Contains(got, `protocol="native"`) {
		t.Errorf("first /metrics shows the second's cut-off")
	}
	got = scrape(t, b)
	for _, want := range []string{`interlingua_slow_consumer_cutoffs_total{protocol="native"} 1`, "interlingua_test_gauge 8"} {
		if !strings.Contains(got, want) {
			t.Errorf("second /metrics lacks %q", want)
		}
	}
	if strings.Contains(got, `protocol="websocket"`) || strings.Contains(got, "interlingua_test_bytes_total") {
		t.Errorf("second /metrics shows the first's figures:\n%s", got)
	}
}

func TestGaugeRegisteredTwicePanics(t *testing.T) {
	m := New()
	m.GaugeFunc("interlingua_test_gauge", "test", func() float64 { return 7 })
	defer func() {
		if recover() == nil {
			t.Error("a second gauge of the same name was accepted")
		}
	}()
	m.GaugeFunc("interlingua_test_gauge", "test", func() float64 { return 8 })
}
