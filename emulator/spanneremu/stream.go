package spanneremu

import (
	"strconv"

	sppb "cloud.google.com/go/spanner/apiv1/spannerpb"
	"google.golang.org/protobuf/proto"
)

// Limits of one PartialResultSet. Rows are never split across messages, so a message exceeds
// them only when a single row does.
const (
	maxValuesPerMessage = 1000
	maxBytesPerMessage  = 1 << 20
)

// streamOutcome sends an outcome as PartialResultSets: metadata in the first, whole rows
// flattened into values, stats and the precommit token in the last. A result without rows
// still sends one message, which carries both.
func streamOutcome(o *outcome, send func(*sppb.PartialResultSet) error) error {
	msg := &sppb.PartialResultSet{Metadata: o.metadata}
	size := 0
	for _, row := range o.rows {
		rowSize := 0
		for _, v := range row {
			rowSize += proto.Size(v)
		}
		if len(msg.Values) > 0 && (len(msg.Values)+len(row) > maxValuesPerMessage || size+rowSize > maxBytesPerMessage) {
			if err := send(msg); err != nil {
				return err
			}
			msg, size = &sppb.PartialResultSet{}, 0
		}
		msg.Values = append(msg.Values, row...)
		size += rowSize
	}
	msg.Stats = o.stats
	msg.PrecommitToken = o.token
	msg.Last = true
	return send(msg)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
