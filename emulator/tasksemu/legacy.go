package tasksemu

import (
	"encoding/json"
	"fmt"
	"time"

	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"google.golang.org/protobuf/encoding/protojson"
)

// legacySnapshot is the content of legacyFile, the data dir format before the log: the whole
// state as one JSON document, rewritten on every change. It is only read, once, to migrate a
// data dir to the log (store.recover); nothing writes it any more.
type legacySnapshot struct {
	Version int           `json:"version"`
	Queues  []legacyQueue `json:"queues"`
	// Name tombstones: deleted queue or full task name -> when it was deleted or finished.
	DeletedQueues map[string]time.Time `json:"deleted_queues,omitempty"`
	FinishedTasks map[string]time.Time `json:"finished_tasks,omitempty"`
}

type legacyQueue struct {
	Queue json.RawMessage `json:"queue"` // cloudtaskspb.Queue in protojson
	Tasks []legacyTask    `json:"tasks"`
}

type legacyTask struct {
	Task       json.RawMessage `json:"task"` // cloudtaskspb.Task in protojson, FULL view
	Execs      int32           `json:"execs,omitempty"`
	PrevCode   int             `json:"prev_code,omitempty"`
	PrevReason string          `json:"prev_reason,omitempty"`
}

// legacyMutations decodes a legacy snapshot into the mutations that rebuild its state, so that
// it is replayed like a snapshot of the current format.
func legacyMutations(path string, data []byte) ([]mutation, error) {
	var snap legacySnapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if snap.Version != 1 {
		return nil, fmt.Errorf("%s: snapshot version %d, this emulator migrates version 1", path, snap.Version)
	}
	var ms []mutation
	for name, at := range snap.DeletedQueues {
		ms = append(ms, mutation{kind: queueDeleted, name: name, at: at})
	}
	for name, at := range snap.FinishedTasks {
		ms = append(ms, mutation{kind: taskDeleted, name: name, at: at})
	}
	for _, lq := range snap.Queues {
		pb := &cloudtaskspb.Queue{}
		if err := protojson.Unmarshal(lq.Queue, pb); err != nil {
			return nil, fmt.Errorf("%s: queue: %w", path, err)
		}
		ms = append(ms, mutation{kind: queuePut, queue: pb})
		for _, lt := range lq.Tasks {
			tpb := &cloudtaskspb.Task{}
			if err := protojson.Unmarshal(lt.Task, tpb); err != nil {
				return nil, fmt.Errorf("%s: task: %w", path, err)
			}
			ms = append(ms, mutation{kind: taskCreated, task: tpb, execs: lt.Execs, prevCode: int32(lt.PrevCode), prevReason: lt.PrevReason})
		}
	}
	return ms, nil
}
