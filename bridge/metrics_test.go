package bridge_test

import (
	"io"
	"strings"
	"testing"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
)

// After runs through the native frontend, /metrics reports them by
// target, frontend, backend and outcome, with error codes and latency.
func TestMetrics(t *testing.T) {
	inst := bridgetest.Start(t, nil)
	postRun(t, inst.URL, `{"target":"echo","inputs":[{"name":"prompt","node":{"data":"YSBiIGM="}}]}`)
	postRun(t, inst.URL, `{"target":"echo","parameters":{"fail_after":1,"fail_code":"unavailable"},"inputs":[{"name":"prompt","node":{"data":"YSBiIGM="}}]}`)
	resp, err := httpClient.Get(inst.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`interlingua_runs_total{backend="scripted",frontend="native",outcome="completed",target="echo"}`,
		`interlingua_runs_total{backend="scripted",frontend="native",outcome="failed",target="echo"}`,
		`interlingua_run_errors_total{code="unavailable"}`,
		`interlingua_time_to_first_delta_seconds_count{backend="scripted",frontend="native"}`,
		`interlingua_delta_interval_seconds_count{backend="scripted",frontend="native"}`,
		`interlingua_nats_connected 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
