package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHandlerServesTheMetrics(t *testing.T) {
	SlowConsumers.WithLabelValues("websocket").Inc()
	RegisterGauge("interlingua_test_gauge", "test", func() float64 { return 7 })
	RegisterGauge("interlingua_test_gauge", "registered twice is fine", func() float64 { return 8 })
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{`interlingua_slow_consumer_cutoffs_total{protocol="websocket"} 1`, "interlingua_test_gauge 7", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
