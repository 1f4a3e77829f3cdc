package platform_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/spanner"
	"golang.org/x/net/http2"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"

	"github.com/spanmart/spanmart/emulator/tasksemu"
	"github.com/spanmart/spanmart/pkg/dbschema"
	"github.com/spanmart/spanmart/pkg/platform"
)

// wire records the bytes a client's connections send and receive.
type wire struct {
	mu       sync.Mutex
	sent     [][]byte // per connection
	received [][]byte
}

// dialer is a gRPC dial option whose connections record their traffic in w.
func (w *wire) dialer() option.ClientOption {
	return option.WithGRPCDialOption(grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.sent, w.received = append(w.sent, nil), append(w.received, nil)
		return &recordedConn{Conn: c, w: w, i: len(w.sent) - 1}, nil
	}))
}

type recordedConn struct {
	net.Conn
	w *wire
	i int
}

func (c *recordedConn) Write(b []byte) (int, error) {
	c.w.mu.Lock()
	c.w.sent[c.i] = append(c.w.sent[c.i], b...)
	c.w.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *recordedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.w.mu.Lock()
	c.w.received[c.i] = append(c.w.received[c.i], b[:n]...)
	c.w.mu.Unlock()
	return n, err
}

// pings counts the HTTP/2 PING frames, acks included, that the client sent and received.
func (w *wire) pings(t *testing.T) (sent, received int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sent) == 0 {
		t.Fatal("the client opened no connection through the recording dialer")
	}
	for i := range w.sent {
		sent += countPings(t, bytes.TrimPrefix(w.sent[i], []byte(http2.ClientPreface)))
		received += countPings(t, w.received[i])
	}
	return sent, received
}

func countPings(t *testing.T, stream []byte) int {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(stream))
	fr.SetMaxReadFrameSize(1 << 24)
	n := 0
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) { // a frame cut off at Close
			return n
		}
		if err != nil {
			t.Fatalf("reading the recorded HTTP/2 frames: %v", err)
		}
		if _, ok := f.(*http2.PingFrame); ok {
			n++
		}
	}
}

// TestGoogleClientsExchangeNoPings: with GoogleClientOptions' fixed flow-control window, and the
// emulators' own, neither end of a Spanner or Cloud Tasks connection pings the other per RPC to
// estimate the link's bandwidth (gRPC-Go's default, a PING and its ack for every response).
func TestGoogleClientsExchangeNoPings(t *testing.T) {
	ctx := context.Background()
	const rpcs = 30

	t.Run("spanner", func(t *testing.T) {
		_, name := env.NewDatabase(t, dbschema.Orders)
		var w wire
		client, err := spanner.NewClientWithConfig(ctx, name, spanner.ClientConfig{DisableNativeMetrics: true},
			append(platform.GoogleClientOptions(), w.dialer())...)
		if err != nil {
			t.Fatal(err)
		}
		for range rpcs {
			_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
				it := tx.Query(ctx, spanner.Statement{SQL: "SELECT 1"})
				defer it.Stop()
				for {
					if _, err := it.Next(); err == iterator.Done {
						return nil
					} else if err != nil {
						return err
					}
				}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		client.Close()
		if sent, received := w.pings(t); sent != 0 || received != 0 {
			t.Errorf("over %d transactions the client sent %d PING frames and received %d, want none", rpcs, sent, received)
		}
	})

	t.Run("cloud tasks", func(t *testing.T) {
		const queue = "projects/p/locations/l/queues/q"
		srv, err := tasksemu.Start(ctx, tasksemu.Options{Queues: []tasksemu.QueueConfig{{Name: queue}}})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		var w wire
		client, err := cloudtasks.NewClient(ctx, append(append(srv.ClientOptions(), platform.GoogleClientOptions()...), w.dialer())...)
		if err != nil {
			t.Fatal(err)
		}
		for range rpcs {
			if _, err := client.GetQueue(ctx, &cloudtaskspb.GetQueueRequest{Name: queue}); err != nil {
				t.Fatal(err)
			}
		}
		client.Close()
		if sent, received := w.pings(t); sent != 0 || received != 0 {
			t.Errorf("over %d RPCs the client sent %d PING frames and received %d, want none", rpcs, sent, received)
		}
	})
}

// BenchmarkSpannerTransaction runs read-write transactions of one query and a commit through a
// client with GoogleClientOptions against the in-process emulator, and reports the CPU the process
// (client and emulator) spent per transaction: the figure to compare when changing the options
// (README, "Performance").
func BenchmarkSpannerTransaction(b *testing.B) {
	ctx := context.Background()
	_, name := env.NewDatabase(b, dbschema.Orders)
	client, err := spanner.NewClientWithConfig(ctx, name, spanner.ClientConfig{DisableNativeMetrics: true}, platform.GoogleClientOptions()...)
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	transaction := func() {
		_, err := client.ReadWriteTransaction(ctx, func(ctx context.Context, tx *spanner.ReadWriteTransaction) error {
			return tx.Query(ctx, spanner.Statement{SQL: "SELECT 1"}).Do(func(*spanner.Row) error { return nil })
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	transaction() // the connection and the multiplexed session
	cpu0 := processCPU(b)
	for b.Loop() {
		transaction()
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
}

// processCPU is the CPU time, user and system, the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
