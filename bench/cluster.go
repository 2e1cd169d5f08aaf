package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/interlingua-dev/interlingua/bridge"
	"github.com/interlingua-dev/interlingua/canonical"
)

// ClusterOptions configure the two-instance measurement.
type ClusterOptions struct {
	// Streams and Deltas size the saturated load (events/s). Defaults 4
	// and 50,000.
	Streams, Deltas int
	// PacedStreams streams of PacedDeltas deltas, one per millisecond each
	// (the scripted backend's delay_ms), measure latency. Defaults 10 and
	// 1,000 (10,000 deltas/s in total).
	PacedStreams, PacedDeltas int
	// Rounds per path, alternating. Default 3.
	Rounds int
	// CPUProfile, when set, receives a CPU profile of the last saturated
	// round across NATS.
	CPUProfile string
	Log        *slog.Logger
}

// ClusterSide is one path's figures.
type ClusterSide struct {
	EventsPerSec float64 `json:"events_per_sec"`
	// P50us and P99us are from the owner's stamp (the bridge stamps each
	// event's time as it leaves the backend) to the client's Recv, paced.
	P50us  float64 `json:"p50_us"`
	P99us  float64 `json:"p99_us"`
	Errors int     `json:"errors"`
	// FirstError is the first failure seen.
	FirstError string `json:"first_error,omitempty"`
}

// ClusterResult compares runs on the instance hosting the backend with
// runs placed from another instance over NATS.
type ClusterResult struct {
	Streams      int          `json:"streams"`
	Deltas       int          `json:"deltas"`
	PacedStreams int          `json:"paced_streams"`
	PacedDeltas  int          `json:"paced_deltas"`
	SameInstance *ClusterSide `json:"same_instance"`
	AcrossNATS   *ClusterSide `json:"across_nats"`
	// NATSAlone is the same loads with no instance, through the same
	// server: messages published on one connection and received on
	// another. Saturated, each round sends as many messages of
	// MessageBytes as instance A published in that round's saturated run
	// across NATS, as fast as they go, and EventsPerSec counts
	// EventsPerMessage events per message: what NATS alone carries for
	// the same messages, the ceiling of AcrossNATS's events/s. Paced, a
	// message per event, stamped as it is published: the floor of
	// AcrossNATS's latency.
	NATSAlone *ClusterSide `json:"nats_alone"`
	// MessageBytes and EventsPerMessage are instance A's messages to NATS
	// in the saturated runs across NATS: mean size, and events received
	// by B's clients per message.
	MessageBytes     float64 `json:"message_bytes"`
	EventsPerMessage float64 `json:"events_per_message"`
	// AloneRatio is across NATS ÷ NATS alone events per second.
	AloneRatio *float64 `json:"nats_alone_ratio,omitempty"`
	// Ratio is across/same events per second.
	Ratio      *float64   `json:"throughput_ratio"`
	AddedP50us *float64   `json:"added_p50_us"`
	AddedP99us *float64   `json:"added_p99_us"`
	LoadBefore [3]float64 `json:"loadavg_before"`
	LoadAfter  [3]float64 `json:"loadavg_after"`
}

// startClusterNATS starts the in-process nats-server (JetStream in a
// temporary folder) the two instances share; stop shuts it down and
// removes the folder.
func startClusterNATS() (ns *natsserver.Server, stop func(), err error) {
	dir, err := os.MkdirTemp("", "interlingua-cluster-")
	if err != nil {
		return nil, nil, err
	}
	ns, err = natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, JetStream: true,
		StoreDir: filepath.Join(dir, "js"), NoLog: true, NoSigs: true})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ns.Start()
	stop = func() { ns.Shutdown(); ns.WaitForShutdown(); os.RemoveAll(dir) }
	if !ns.ReadyForConnections(10 * time.Second) {
		stop()
		return nil, nil, errors.New("nats-server not ready")
	}
	return ns, stop, nil
}

// Cluster starts a NATS server and two instances: A hosts the scripted
// backend, B hosts none, so B's runs are placed on A and their events
// come back over NATS. Runs are started through each instance's
// canonical.Runner (no frontend), as bridge/cluster_bench_test.go does.
func Cluster(ctx context.Context, o ClusterOptions) (*ClusterResult, error) {
	o.Streams, o.Deltas = cmpOr(o.Streams, 4), cmpOr(o.Deltas, 50_000)
	o.PacedStreams, o.PacedDeltas = cmpOr(o.PacedStreams, 10), cmpOr(o.PacedDeltas, 1000)
	o.Rounds = cmpOr(o.Rounds, 3)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	ns, stop, err := startClusterNATS()
	if err != nil {
		return nil, err
	}
	defer stop()
	conf := func(host ...string) bridge.Config {
		c := bridge.DefaultConfig()
		c.NATS.URL = ns.ClientURL()
		c.HostBackends = host
		return c
	}
	owner, err := StartInstance(ctx, conf(), o.Log)
	if err != nil {
		return nil, err
	}
	defer owner.Close()
	client, err := StartInstance(ctx, conf("none"), o.Log)
	if err != nil {
		return nil, err
	}
	defer client.Close()

	res := &ClusterResult{Streams: o.Streams, Deltas: o.Deltas, PacedStreams: o.PacedStreams, PacedDeltas: o.PacedDeltas,
		LoadBefore: loadAvg()}
	paths := []struct {
		r   canonical.Runner
		acc *clusterAcc
	}{{owner.Bridge(), &clusterAcc{}}, {client.Bridge(), &clusterAcc{}}}
	// Warm-up: placement subscriptions, JetStream subjects.
	for _, p := range paths {
		if _, err := clusterRound(ctx, p.r, o.Streams, 100, 0); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	alone := &clusterAcc{}
	var msgs, bytes uint64
	var acrossEvents int64
	for r := 0; r < o.Rounds; r++ {
		lat, err := natsAloneRound(ctx, ns.ClientURL(), o.PacedStreams, o.PacedDeltas)
		if err != nil {
			return nil, fmt.Errorf("nats alone: %w", err)
		}
		alone.add(&clusterRoundResult{lat: lat}, true)
		for pi, p := range paths {
			var stopProfile func()
			if o.CPUProfile != "" && pi == 1 && r == o.Rounds-1 {
				if stopProfile, err = startCPUProfile(o.CPUProfile); err != nil {
					return nil, err
				}
			}
			m0, b0 := owner.Fabric().Published(), owner.Fabric().PublishedBytes()
			sat, err := clusterRound(ctx, p.r, o.Streams, o.Deltas, 0)
			if stopProfile != nil {
				stopProfile()
			}
			if err != nil {
				return nil, err
			}
			p.acc.add(sat, false)
			if pi == 1 {
				m, b := owner.Fabric().Published()-m0, owner.Fabric().PublishedBytes()-b0
				msgs, bytes, acrossEvents = msgs+m, bytes+b, acrossEvents+sat.events
				if err := alone.saturated(ctx, ns.ClientURL(), o.Streams, m, b, sat.events); err != nil {
					return nil, fmt.Errorf("nats alone: %w", err)
				}
			}
			paced, err := clusterRound(ctx, p.r, o.PacedStreams, o.PacedDeltas, 1)
			if err != nil {
				return nil, err
			}
			p.acc.add(paced, true)
		}
	}
	res.LoadAfter = loadAvg()
	res.SameInstance, res.AcrossNATS, res.NATSAlone = paths[0].acc.side(), paths[1].acc.side(), alone.side()
	if msgs > 0 {
		res.MessageBytes, res.EventsPerMessage = float64(bytes)/float64(msgs), float64(acrossEvents)/float64(msgs)
	}
	s, a := res.SameInstance, res.AcrossNATS
	res.Ratio = ptr(a.EventsPerSec / s.EventsPerSec)
	if n := res.NATSAlone.EventsPerSec; n > 0 {
		res.AloneRatio = ptr(a.EventsPerSec / n)
	}
	res.AddedP50us = ptr(a.P50us - s.P50us)
	res.AddedP99us = ptr(a.P99us - s.P99us)
	return res, nil
}

func cmpOr(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

type clusterRoundResult struct {
	events int64
	wall   time.Duration
	lat    []int64
	errs   []error
}

type clusterAcc struct {
	events   int64
	wall     time.Duration
	lat      []int64
	errors   int
	firstErr string
}

func (a *clusterAcc) add(r *clusterRoundResult, paced bool) {
	if paced {
		a.lat = append(a.lat, r.lat...)
	} else {
		a.events += r.events
		a.wall += r.wall
	}
	for _, err := range r.errs {
		if err != nil {
			a.errors++
			if a.firstErr == "" {
				a.firstErr = err.Error()
			}
		}
	}
}

func (a *clusterAcc) side() *ClusterSide {
	lat := sortedCopy(a.lat)
	us := func(ns int64) float64 { return float64(ns/10) / 100 }
	s := &ClusterSide{P50us: us(percentile(lat, 50)), P99us: us(percentile(lat, 99)), Errors: a.errors, FirstError: a.firstErr}
	if a.wall > 0 {
		s.EventsPerSec = float64(int64(float64(a.events) / a.wall.Seconds()))
	}
	return s
}

// clusterRound runs streams runs of the scripted stream target at once;
// with delayMS it records each event's latency from its owner stamp.
func clusterRound(ctx context.Context, r canonical.Runner, streams, deltas, delayMS int) (*clusterRoundResult, error) {
	res := &clusterRoundResult{errs: make([]error, streams)}
	counts := make([]int64, streams)
	lats := make([][]int64, streams)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &canonical.Request{Target: "stream", Parameters: map[string]*structpb.Value{
				"deltas": structpb.NewNumberValue(float64(deltas)), "delay_ms": structpb.NewNumberValue(float64(delayMS))}}
			if delayMS > 0 {
				lats[i] = make([]int64, 0, deltas+8)
			}
			<-start
			s, err := r.Run(ctx, req)
			if err != nil {
				res.errs[i] = err
				return
			}
			defer s.Close()
			for {
				ev, err := s.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					res.errs[i] = err
					return
				}
				counts[i]++
				if delayMS > 0 {
					lats[i] = append(lats[i], time.Now().UnixNano()-ev.GetTimeUnixNano())
				}
				if st, ok := canonical.TerminalOf(ev); ok && st != canonical.StatusCompleted {
					res.errs[i] = fmt.Errorf("run ended %v: %s", st, ev.GetLifecycle().GetError().GetMessage())
				}
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	res.wall = time.Since(t0)
	for i := range counts {
		res.events += counts[i]
		res.lat = append(res.lat, lats[i]...)
	}
	return res, ctx.Err()
}

// natsAloneRound sends the paced load with no instance: streams
// goroutines each publish deltas messages of a delta event's size, one a
// millisecond, on one connection, and each is received on another
// connection by a goroutine per stream (as an instance's client takes its
// run's events); latency is from just before Publish to the receipt.
func natsAloneRound(ctx context.Context, url string, streams, deltas int) ([]int64, error) {
	pub, err := nats.Connect(url, nats.Name("bench-nats-alone-pub"))
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	sub, err := nats.Connect(url, nats.Name("bench-nats-alone-sub"))
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	subs := make([]*nats.Subscription, streams)
	for i := range subs {
		if subs[i], err = sub.SubscribeSync(fmt.Sprintf("bench.alone.%d", i)); err != nil {
			return nil, err
		}
	}
	if err := sub.Flush(); err != nil {
		return nil, err
	}
	lats := make([][]int64, streams)
	errs := make([]error, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(2)
		go func() { // the consumer
			defer wg.Done()
			lats[i] = make([]int64, 0, deltas)
			for range deltas {
				m, err := subs[i].NextMsgWithContext(ctx)
				if err != nil {
					errs[i] = err
					return
				}
				sent := int64(binary.BigEndian.Uint64(m.Data))
				lats[i] = append(lats[i], time.Now().UnixNano()-sent)
			}
		}()
		go func() { // the producer, paced as the scripted backend's delay_ms
			defer wg.Done()
			data := make([]byte, 100)
			subject := fmt.Sprintf("bench.alone.%d", i)
			for range deltas {
				time.Sleep(time.Millisecond)
				binary.BigEndian.PutUint64(data, uint64(time.Now().UnixNano()))
				if err := pub.Publish(subject, data); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	var all []int64
	for i := range lats {
		if errs[i] != nil {
			return nil, errs[i]
		}
		all = append(all, lats[i]...)
	}
	return all, nil
}

// saturated sends what a saturated round across NATS sent (msgs messages
// of bytes in all, carrying events events), through NATS alone, and
// counts it as that round's events.
func (a *clusterAcc) saturated(ctx context.Context, url string, streams int, msgs, bytes uint64, events int64) error {
	if msgs == 0 {
		return errors.New("instance A published no messages in the round")
	}
	per := int(msgs+uint64(streams)-1) / streams
	size := max(int(bytes/msgs), 8)
	wall, err := natsAloneSaturated(ctx, url, streams, per, size)
	if err != nil {
		return err
	}
	a.add(&clusterRoundResult{events: events * int64(per*streams) / int64(msgs), wall: wall}, false)
	return nil
}

// natsAloneSaturated publishes msgs messages of size bytes on each of
// streams subjects, as fast as they go, on one connection, and receives
// them on another (a goroutine per subject, as an instance's clients take
// their runs' events); it returns the time until the last arrived.
func natsAloneSaturated(ctx context.Context, url string, streams, msgs, size int) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute) // a lost message ends the round
	defer cancel()
	pub, err := nats.Connect(url, nats.Name("bench-nats-alone-pub"))
	if err != nil {
		return 0, err
	}
	defer pub.Close()
	sub, err := nats.Connect(url, nats.Name("bench-nats-alone-sub"))
	if err != nil {
		return 0, err
	}
	defer sub.Close()
	subs := make([]*nats.Subscription, streams)
	for i := range subs {
		if subs[i], err = sub.SubscribeSync(fmt.Sprintf("bench.alone.sat.%d", i)); err != nil {
			return 0, err
		}
		// Room for the whole round, so that a reader behind its publisher
		// is not a slow consumer (bounded by the round's size).
		if err := subs[i].SetPendingLimits(msgs+1, (msgs+1)*size); err != nil {
			return 0, err
		}
	}
	if err := sub.Flush(); err != nil {
		return 0, err
	}
	errs := make([]error, streams)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range streams {
		wg.Add(2)
		go func() { // the consumer
			defer wg.Done()
			for range msgs {
				if _, err := subs[i].NextMsgWithContext(ctx); err != nil {
					errs[i] = err
					return
				}
			}
		}()
		go func() { // the producer
			defer wg.Done()
			data := make([]byte, size)
			subject := fmt.Sprintf("bench.alone.sat.%d", i)
			for range msgs {
				if err := pub.Publish(subject, data); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	return wall, errors.Join(errs...)
}

// WriteClusterMarkdown writes the cluster result as a table.
func WriteClusterMarkdown(w io.Writer, r *ClusterResult) {
	fmt.Fprintf(w, "### Two instances over NATS\n\nSaturated: %d streams × %d deltas; latency paced: %d streams × %d deltas at 1 ms each (the owner's event stamp to the client's Recv).\n\n",
		r.Streams, r.Deltas, r.PacedStreams, r.PacedDeltas)
	fmt.Fprintln(w, "| figure | same instance | A→B over NATS | difference |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	s, a := r.SameInstance, r.AcrossNATS
	fmt.Fprintf(w, "| events/s | %s | %s | ×%.2f |\n", num(s.EventsPerSec), num(a.EventsPerSec), a.EventsPerSec/max(s.EventsPerSec, 1))
	fmt.Fprintf(w, "| latency p50 (µs) | %s | %s | %s µs |\n", trim(s.P50us), trim(a.P50us), signed(a.P50us-s.P50us))
	fmt.Fprintf(w, "| latency p99 (µs) | %s | %s | %s µs |\n", trim(s.P99us), trim(a.P99us), signed(a.P99us-s.P99us))
	fmt.Fprintf(w, "| errors | %d | %d | |\n", s.Errors, a.Errors)
	if n := r.NATSAlone; n != nil && n.EventsPerSec > 0 {
		fmt.Fprintf(w, "\nThe same messages through NATS alone (instance A's, %s B each on average, %.1f events per message: published as fast as they go on one connection, received on another): %s events/s; from another instance ÷ NATS alone ×%.2f.\n", num(r.MessageBytes), r.EventsPerMessage, num(n.EventsPerSec), a.EventsPerSec/n.EventsPerSec)
	}
	if n := r.NATSAlone; n != nil {
		fmt.Fprintf(w, "\nThe same paced load through NATS alone (no instance: a message per event published on one connection, received on another, through the same server): latency p50 %s µs, p99 %s µs. That is the floor of the A→B figures: the hop itself on this machine.\n", trim(n.P50us), trim(n.P99us))
	}
	fmt.Fprintf(w, "\nLoad average %.2f before, %.2f after.\n", r.LoadBefore[0], r.LoadAfter[0])
	for _, e := range []string{s.FirstError, a.FirstError} {
		if e != "" {
			fmt.Fprintf(w, "First error: %s\n", e)
		}
	}
	fmt.Fprintln(w)
}
