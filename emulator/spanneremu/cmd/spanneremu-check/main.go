// Command spanneremu-check runs the histcheck workloads against a Spanner emulator and checks
// the recorded transaction histories for isolation and consistency anomalies (see package
// emulator/spanneremu/histcheck for what is recorded and checked).
//
//	go run ./emulator/spanneremu/cmd/spanneremu-check                      # every workload, 5 seeds, 1m each
//	go run ./emulator/spanneremu/cmd/spanneremu-check -duration 10s -seed 7 -workloads bank,list-append
//
// Without SPANNER_EMULATOR_HOST it starts an in-process spanneremu; with it, it checks that
// endpoint (spanneremu, or Google's emulator). Every workload runs once per seed, each run on a
// fresh database of its own.
//
// Flags:
//
//	-duration d     how long each workload runs per seed (default 1m)
//	-seeds n        how many seeds, 1..n (default 5)
//	-seed s         run this one seed instead
//	-workers n      concurrent workers (default 8)
//	-workloads list comma-separated: bank, list-append, register (default all)
//	-keys n         rows per workload table (default: 8 accounts, 6 lists, 4 registers)
//	-max-per-kind n anomalies of one kind printed in full per run (default 20; the rest are counted)
//	-viz dir        where porcupine's HTML visualizations go (default the temporary directory)
//
// For each workload and seed it prints the counts (transactions, attempts, committed,
// aborted, what each checker examined) and every anomaly report. It exits 1 if any anomaly was
// found, 2 if a run could not be carried out.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spanmart/spanmart/emulator/spanneremu"
	"github.com/spanmart/spanmart/emulator/spanneremu/histcheck"
)

func main() {
	duration := flag.Duration("duration", time.Minute, "how long each workload runs per seed")
	seeds := flag.Int("seeds", 5, "how many seeds (1..n)")
	seed := flag.Int64("seed", 0, "run only this seed")
	workers := flag.Int("workers", 8, "concurrent workers")
	workloads := flag.String("workloads", strings.Join(histcheck.Workloads, ","), "comma-separated workloads: "+strings.Join(histcheck.Workloads, ", "))
	keys := flag.Int("keys", 0, "rows per workload table (0: the workload's default)")
	maxPerKind := flag.Int("max-per-kind", 20, "anomalies of one kind printed in full per run")
	viz := flag.String("viz", "", "directory for porcupine's HTML visualizations (default: the temporary directory)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("spanneremu-check: ")

	seedList := make([]int64, 0, *seeds)
	seedSet := false
	flag.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	if seedSet {
		seedList = append(seedList, *seed)
	} else {
		for s := 1; s <= *seeds; s++ {
			seedList = append(seedList, int64(s))
		}
	}
	var names []string
	for _, w := range strings.Split(*workloads, ",") {
		if w = strings.TrimSpace(w); w != "" {
			names = append(names, w)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if os.Getenv("SPANNER_EMULATOR_HOST") == "" {
		srv, err := spanneremu.Start(ctx, spanneremu.Options{})
		if err != nil {
			log.Fatalf("start emulator: %v", err)
		}
		defer srv.Close()
		os.Setenv("SPANNER_EMULATOR_HOST", srv.Addr())
		log.Printf("in-process spanneremu on %s", srv.Addr())
	} else {
		log.Printf("checking SPANNER_EMULATOR_HOST=%s", os.Getenv("SPANNER_EMULATOR_HOST"))
	}
	os.Exit(run(ctx, names, seedList, histcheck.Options{Workers: *workers, Duration: *duration, Keys: *keys, VisualizeDir: *viz}, *maxPerKind))
}

func run(ctx context.Context, names []string, seeds []int64, opts histcheck.Options, maxPerKind int) int {
	admin, err := histcheck.NewAdmin(ctx, "histcheck", "check")
	if err != nil {
		log.Print(err)
		return 2
	}
	defer admin.Close()
	code := 0
	total := map[string]int{}
	for _, name := range names {
		for _, seed := range seeds {
			res, err := runOne(ctx, admin, name, seed, opts)
			if err != nil {
				log.Printf("%s seed %d: %v", name, seed, err)
				return 2
			}
			res.MaxPerKind = maxPerKind
			fmt.Println(res.String())
			fmt.Println()
			for k, n := range res.KindCounts() {
				total[name+" "+k] += n
			}
			if res.Anomalous() {
				code = 1
			}
		}
	}
	if code == 0 {
		fmt.Println("no anomalies")
	} else {
		fmt.Println("anomalies found:")
		for k, n := range total {
			fmt.Printf("  %s: %d\n", k, n)
		}
	}
	return code
}

func runOne(ctx context.Context, admin *histcheck.Admin, name string, seed int64, opts histcheck.Options) (*histcheck.Result, error) {
	dbName, err := admin.CreateDatabase(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin.DropDatabase(dctx, dbName); err != nil {
			log.Printf("drop %s: %v", dbName, err)
		}
	}()
	client, err := histcheck.NewClient(ctx, dbName)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	opts.Seed = seed
	rctx, cancel := context.WithTimeout(ctx, opts.Duration+5*time.Minute)
	defer cancel()
	res, _, err := histcheck.Run(rctx, client, name, opts)
	return res, err
}
