package bridge_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge/bridgetest"
	"github.com/interlingua-dev/interlingua/canonical"
)

// BenchmarkClusterEvents streams one run of b.N deltas from the scripted
// backend, on the instance that hosts it ("same-instance") and from another
// instance through NATS ("a-to-b"), as fast as they come ("saturated":
// events/s) and paced at one delta per millisecond ("paced": latency from
// the owner's stamp to the client, p50 and p99, without queueing). The
// difference between the two instances is what the fabric adds.
func BenchmarkClusterEvents(b *testing.B) {
	ns := natsServer(b)
	owner := bridgetest.Start(b, clusterConfig(ns.ClientURL()))
	client := bridgetest.Start(b, clusterConfig(ns.ClientURL(), "none"))
	for _, tc := range []struct {
		name string
		inst *bridgetest.Instance
	}{{"same-instance", owner}, {"a-to-b", client}} {
		for _, pace := range []struct {
			name  string
			delay float64
		}{{"saturated", 0}, {"paced", 1}} {
			b.Run(tc.name+"/"+pace.name, func(b *testing.B) {
				benchRun(b, tc.inst, pace.delay)
			})
		}
	}
}

func benchRun(b *testing.B, inst *bridgetest.Instance, delayMS float64) {
	req := &canonical.Request{Target: "stream", Parameters: map[string]*structpb.Value{
		"deltas": structpb.NewNumberValue(float64(b.N)), "delay_ms": structpb.NewNumberValue(delayMS)}}
	b.ReportAllocs()
	start := time.Now()
	s, err := inst.Bridge().Run(context.Background(), req)
	if err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N+8)
	for {
		ev, err := s.Recv()
		if err != nil {
			break
		}
		lat = append(lat, time.Since(time.Unix(0, ev.GetTimeUnixNano())))
	}
	elapsed := time.Since(start)
	s.Close()
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "events/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
