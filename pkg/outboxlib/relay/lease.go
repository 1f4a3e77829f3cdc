package relay

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"
	"time"

	"cloud.google.com/go/spanner"
	"go.uber.org/zap"

	"github.com/spanmart/spanmart/gen/dao/outboxdb"
	"github.com/spanmart/spanmart/pkg/outboxlib"
)

// MemberShardBase is the first Shard of the presence rows in OutboxLeases: an instance keeps the
// row MemberShardBase + hash(owner) alive while it runs, so that it counts in the fair share
// before it holds any shard. Rows below it are the shard leases 0..outboxlib.Shards-1.
const MemberShardBase int64 = 1 << 40

func memberShard(owner string) int64 {
	h := fnv.New32a()
	h.Write([]byte(owner))
	return MemberShardBase + int64(h.Sum32())
}

// errLeaseLost aborts a batch whose shard is no longer held (owner or epoch changed).
var errLeaseLost = errors.New("shard lease lost")

// lease is a shard this instance holds.
type lease struct {
	epoch     int64
	expiresAt time.Time
}

// source is the state of one source database.
type source struct {
	r   *Relay
	src Source
	log *zap.Logger

	mu   sync.Mutex
	held map[int64]lease

	// The scans' schedule (shard.go): the shards due a scan and those in a batch now, the
	// source's back-off after a failed batch, and kick, which wakes the scan loop.
	schedMu   sync.Mutex
	due, busy shardSet
	failing   time.Duration
	retryAt   time.Time
	kick      chan struct{}

	// publishLag is commit → tasks created of this instance's recent publications (Status).
	publishLag outboxlib.LagWindow

	// workers run the batches and their CreateTask calls while the scan loop runs (workers.go).
	workers *workers

	// The batches enqueued and waiting for their mark, their rows' event ids, and the shards to
	// wake after it (mark.go).
	markMu        sync.Mutex
	toMark        []*markRequest
	unmarked      map[string]bool
	wakeAfterMark map[int64]bool
}

func newSource(r *Relay, s Source) *source {
	src := &source{r: r, src: s, log: r.log.With(zap.String("source", s.Name)), held: map[int64]lease{},
		unmarked: map[string]bool{}, wakeAfterMark: map[int64]bool{}, kick: make(chan struct{}, 1)}
	return src
}

// holds returns the epoch of shard when this instance holds it with some time to spare.
func (s *source) holds(shard int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.held[shard]
	// Stop a little before expiry: another instance may take the shard right after it.
	if !ok || time.Until(l.expiresAt) < s.r.cfg.LeaseDuration/6 {
		return 0, false
	}
	return l.epoch, true
}

// heldShards returns the number of shards held.
func (s *source) heldCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// run keeps the leases and scans the shards held until ctx is done, then releases the leases.
func (s *source) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.scanLoop(ctx) })
	wg.Go(func() { s.probeLoop(ctx) })
	wg.Go(func() { s.markLoop(ctx) })
	wg.Go(func() { s.statusLoop(ctx) })
	if s.r.ledgerEnabled() {
		wg.Go(func() { s.ledgerLoop(ctx) })
	}
	tick := time.NewTicker(s.r.cfg.LeaseDuration / 3)
	defer tick.Stop()
	for {
		if err := s.renew(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("renew shard leases", zap.Error(err))
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	wg.Wait()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.release(rctx); err != nil {
		s.log.Warn("release shard leases", zap.Error(err))
		return
	}
	s.log.Info("released shard leases")
}

// renew renews the shards held, takes free or expired ones up to the fair share
// ceil(Shards / live instances) and gives back any above it, in one read-write transaction.
func (s *source) renew(ctx context.Context) error {
	cfg := s.r.cfg
	me := cfg.Owner
	var next map[int64]lease
	_, err := s.src.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		rows, err := outboxdb.ReadOutboxLeaseRows(ctx, txn, spanner.AllKeys())
		if err != nil {
			return err
		}
		now := time.Now()
		expires := now.Add(cfg.LeaseDuration)
		live := map[string]bool{me: true}
		shards := map[int64]*outboxdb.OutboxLease{}
		var ms []*spanner.Mutation
		for _, l := range rows {
			if l.Shard < outboxlib.Shards {
				shards[l.Shard] = l
			}
			alive := l.Owner.Valid && l.ExpiresAt.Valid && l.ExpiresAt.Time.After(now)
			if alive {
				live[l.Owner.StringVal] = true
			}
			// Forget presence rows of instances gone for a while (a crash leaves them behind).
			if l.Shard >= MemberShardBase && l.Owner.StringVal != me && (!l.ExpiresAt.Valid || now.Sub(l.ExpiresAt.Time) > 10*cfg.LeaseDuration) {
				ms = append(ms, l.Delete())
			}
		}
		share := (outboxlib.Shards + len(live) - 1) / len(live)
		next = map[int64]lease{}
		write := func(l *outboxdb.OutboxLease, owner string, epoch int64, until time.Time) {
			l.Owner = spanner.NullString{StringVal: owner, Valid: owner != ""}
			l.Epoch = epoch
			l.ExpiresAt = spanner.NullTime{Time: until, Valid: owner != ""}
			l.UpdatedAt = spanner.CommitTimestamp
			ms = append(ms, l.InsertOrUpdate())
		}
		// Keep (renew) own shards up to the share, give back the rest.
		for shard := range int64(outboxlib.Shards) {
			l := shards[shard]
			if l == nil || l.Owner.StringVal != me {
				continue
			}
			if len(next) < share {
				write(l, me, l.Epoch, expires)
				next[shard] = lease{epoch: l.Epoch, expiresAt: expires}
			} else {
				write(l, "", l.Epoch, time.Time{})
			}
		}
		// Take free and expired shards up to the share; a new owner means a new epoch.
		for shard := range int64(outboxlib.Shards) {
			if len(next) >= share {
				break
			}
			l := shards[shard]
			if l == nil {
				l = &outboxdb.OutboxLease{Shard: shard}
			} else if l.Owner.StringVal == me || (l.Owner.Valid && l.ExpiresAt.Valid && l.ExpiresAt.Time.After(now)) {
				continue
			}
			write(l, me, l.Epoch+1, expires)
			next[shard] = lease{epoch: l.Epoch, expiresAt: expires}
		}
		member := &outboxdb.OutboxLease{Shard: memberShard(me)}
		write(member, me, 0, expires)
		return txn.BufferWrite(ms)
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	for shard := range s.held {
		if _, ok := next[shard]; !ok {
			s.log.Debug("gave up shard", zap.Int64("shard", shard))
		}
	}
	var taken []int64
	for shard := range next {
		if _, ok := s.held[shard]; !ok {
			taken = append(taken, shard)
		}
	}
	s.held = next
	s.mu.Unlock()
	// A due shard found not held was dropped (startBatch): scan the shards taken now.
	for _, shard := range taken {
		s.wakeShard(shard)
	}
	return nil
}

// release gives back every lease of this instance and removes its presence row.
func (s *source) release(ctx context.Context) error {
	me := s.r.cfg.Owner
	s.mu.Lock()
	s.held = map[int64]lease{}
	s.mu.Unlock()
	_, err := s.src.Client.ReadWriteTransaction(ctx, func(ctx context.Context, txn *spanner.ReadWriteTransaction) error {
		rows, err := outboxdb.ReadOutboxLeaseRows(ctx, txn, spanner.KeyRange{Start: spanner.Key{int64(0)}, End: spanner.Key{int64(outboxlib.Shards)}, Kind: spanner.ClosedOpen})
		if err != nil {
			return err
		}
		ms := []*spanner.Mutation{outboxdb.DeleteOutboxLease(memberShard(me))}
		for _, l := range rows {
			if l.Owner.StringVal != me {
				continue
			}
			l.Owner, l.ExpiresAt, l.UpdatedAt = spanner.NullString{}, spanner.NullTime{}, spanner.CommitTimestamp
			ms = append(ms, l.InsertOrUpdate())
		}
		return txn.BufferWrite(ms)
	})
	return err
}
