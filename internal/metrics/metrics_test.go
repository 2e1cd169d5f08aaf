package metrics

import (
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The counter is process-wide, so the test expects one more than it found
// (it also runs under -count=N).
func TestHandlerServesTheMetrics(t *testing.T) {
	cutoffs := SlowConsumers.WithLabelValues("websocket")
	var before dto.Metric
	if err := cutoffs.Write(&before); err != nil {
		t.Fatal(err)
	}
	want := `interlingua_slow_consumer_cutoffs_total{protocol="websocket"} ` + strconv.FormatFloat(before.GetCounter().GetValue()+1, 'g', -1, 64)
	cutoffs.Inc()
	RegisterGauge("interlingua_test_gauge", "test", func() float64 { return 7 })
	RegisterGauge("interlingua_test_gauge", "registered twice is fine", func() float64 { return 8 })
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{want, "interlingua_test_gauge 7", "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
