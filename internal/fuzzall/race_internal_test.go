package fuzzall

import "testing"

// The coordinator's own deadline (go.dev/issue/75804) is told apart from a target's failure.
func TestCoordinatorRace(t *testing.T) {
	const head = "fuzz: elapsed: 0s, gathering baseline coverage: 0/80 completed\n" +
		"fuzz: elapsed: 5s, execs: 2052 (974/sec), new interesting: 3 (total: 83)\n"
	tests := []struct {
		name, out string
		want      bool
	}{
		{"the deadline alone", head + "--- FAIL: FuzzParseDelivery (5.02s)\n    context deadline exceeded\nFAIL\nexit status 1\nFAIL\tgithub.com/spanmart/spanmart/pkg/outboxlib\t5.235s\n", true},
		{"another target's name", head + "--- FAIL: FuzzOther (5.02s)\n    context deadline exceeded\nFAIL\nexit status 1\n", false},
		{"a failing input", head + "--- FAIL: FuzzParseDelivery (0.12s)\n    --- FAIL: FuzzParseDelivery (0.00s)\n        event_fuzz_test.go:90: boom\n" +
			"    Failing input written to testdata/fuzz/FuzzParseDelivery/0123\n    To re-run:\n    go test -run=FuzzParseDelivery/0123\nFAIL\nexit status 1\n", false},
		{"a deadline and more", head + "--- FAIL: FuzzParseDelivery (5.02s)\n    context deadline exceeded\n    fuzz_test.go:10: and something else\nFAIL\n", false},
		{"a pass", head + "PASS\nok  \tgithub.com/spanmart/spanmart/pkg/outboxlib\t5.2s\n", false},
	}
	for _, tt := range tests {
		if got := coordinatorRace([]byte(tt.out), "FuzzParseDelivery"); got != tt.want {
			t.Errorf("%s: coordinatorRace = %v, want %v", tt.name, got, tt.want)
		}
	}
}
