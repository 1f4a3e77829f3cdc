package spanneremu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	instancepb "cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// instancesFile holds the instances of a data directory. Databases are kept by the engine.
const instancesFile = "instances.json"

// instanceStore keeps the emulator's instances, in memory and, with a data directory, in
// instances.json.
type instanceStore struct {
	path string // "" = memory only

	mu        sync.Mutex
	instances map[string]*instancepb.Instance
}

func openInstanceStore(dataDir string) (*instanceStore, error) {
	st := &instanceStore{instances: map[string]*instancepb.Instance{}}
	if dataDir == "" {
		return st, nil
	}
	st.path = filepath.Join(dataDir, instancesFile)
	b, err := os.ReadFile(st.path)
	if os.IsNotExist(err) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read instances: %w", err)
	}
	var saved instancepb.ListInstancesResponse
	// Unknown fields are dropped so that a file written by a newer emulator still loads.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &saved); err != nil {
		return nil, fmt.Errorf("read instances from %s: %w", st.path, err)
	}
	for _, in := range saved.Instances {
		st.instances[in.Name] = in
	}
	return st, nil
}

// saveLocked writes every instance to the data directory. The write goes through a temporary
// file and a rename, so a crash leaves either the old or the new file, never a torn one.
func (st *instanceStore) saveLocked() error {
	if st.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(st.path), 0o755); err != nil {
		return errorf(codes.Internal, "save instances: %v", err)
	}
	all := &instancepb.ListInstancesResponse{Instances: st.sortedLocked()}
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(all)
	if err != nil {
		return errorf(codes.Internal, "save instances: %v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(st.path), instancesFile+".tmp*")
	if err != nil {
		return errorf(codes.Internal, "save instances: %v", err)
	}
	_, werr := tmp.Write(b)
	if err := tmp.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), st.path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return errorf(codes.Internal, "save instances: %v", werr)
	}
	return nil
}

func (st *instanceStore) sortedLocked() []*instancepb.Instance {
	out := make([]*instancepb.Instance, 0, len(st.instances))
	for _, in := range st.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func instanceNotFound(name string) error {
	return errorf(codes.NotFound, "Instance not found: %s", name)
}

// get returns a copy of an instance.
func (st *instanceStore) get(name string) (*instancepb.Instance, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	in, ok := st.instances[name]
	if !ok {
		return nil, instanceNotFound(name)
	}
	return proto.Clone(in).(*instancepb.Instance), nil
}

func (st *instanceStore) exists(name string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.instances[name]
	return ok
}

// list returns copies of the instances of a project, sorted by name.
func (st *instanceStore) list(project string) []*instancepb.Instance {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*instancepb.Instance
	for _, in := range st.sortedLocked() {
		if strings.HasPrefix(in.Name, "projects/"+project+"/instances/") {
			out = append(out, proto.Clone(in).(*instancepb.Instance))
		}
	}
	return out
}

func (st *instanceStore) create(in *instancepb.Instance) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.instances[in.Name]; ok {
		return errorf(codes.AlreadyExists, "Instance already exists: %s", in.Name)
	}
	st.instances[in.Name] = in
	if err := st.saveLocked(); err != nil {
		delete(st.instances, in.Name)
		return err
	}
	return nil
}

// update applies change to a copy of the named instance and stores the copy.
func (st *instanceStore) update(name string, change func(*instancepb.Instance) error) (*instancepb.Instance, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, ok := st.instances[name]
	if !ok {
		return nil, instanceNotFound(name)
	}
	in := proto.Clone(old).(*instancepb.Instance)
	if err := change(in); err != nil {
		return nil, err
	}
	st.instances[name] = in
	if err := st.saveLocked(); err != nil {
		st.instances[name] = old
		return nil, err
	}
	return proto.Clone(in).(*instancepb.Instance), nil
}

func (st *instanceStore) delete(name string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, ok := st.instances[name]
	if !ok {
		return instanceNotFound(name)
	}
	delete(st.instances, name)
	if err := st.saveLocked(); err != nil {
		st.instances[name] = old
		return err
	}
	return nil
}

// instanceAdminService implements google.spanner.admin.instance.v1.InstanceAdmin.
type instanceAdminService struct {
	instancepb.UnimplementedInstanceAdminServer
	s *Server
}

func emulatorConfig(project string) *instancepb.InstanceConfig {
	return &instancepb.InstanceConfig{
		Name:        instanceConfigName(project),
		DisplayName: "Emulator Instance Config",
		ConfigType:  instancepb.InstanceConfig_GOOGLE_MANAGED,
		State:       instancepb.InstanceConfig_READY,
	}
}

func (a *instanceAdminService) ListInstanceConfigs(_ context.Context, req *instancepb.ListInstanceConfigsRequest) (*instancepb.ListInstanceConfigsResponse, error) {
	project, err := parseProject(req.GetParent())
	if err != nil {
		return nil, err
	}
	configs := []*instancepb.InstanceConfig{emulatorConfig(project)}
	start, end, next, err := page(len(configs), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &instancepb.ListInstanceConfigsResponse{InstanceConfigs: configs[start:end], NextPageToken: next}, nil
}

func (a *instanceAdminService) GetInstanceConfig(_ context.Context, req *instancepb.GetInstanceConfigRequest) (*instancepb.InstanceConfig, error) {
	project, err := configProject(req.GetName())
	if err != nil {
		return nil, err
	}
	return emulatorConfig(project), nil
}

// configProject returns the project of the emulator's config name, or NOT_FOUND for any
// other config.
func configProject(name string) (string, error) {
	project, id, ok := strings.Cut(strings.TrimPrefix(name, "projects/"), "/instanceConfigs/")
	if !strings.HasPrefix(name, "projects/") || !ok || project == "" || strings.Contains(project, "/") || id != emulatorConfigID {
		return "", errorf(codes.NotFound, "Instance config not found: %s", name)
	}
	return project, nil
}

func (a *instanceAdminService) CreateInstance(_ context.Context, req *instancepb.CreateInstanceRequest) (*longrunningpb.Operation, error) {
	project, err := parseProject(req.GetParent())
	if err != nil {
		return nil, err
	}
	if !validInstanceID(req.GetInstanceId()) {
		return nil, errorf(codes.InvalidArgument, "Invalid instance id: %q (must match [a-z][-a-z0-9]*[a-z0-9], 2 to 64 characters)", req.GetInstanceId())
	}
	if req.GetInstance() == nil {
		return nil, errorf(codes.InvalidArgument, "Missing instance")
	}
	name := req.GetParent() + "/instances/" + req.GetInstanceId()
	in := proto.Clone(req.GetInstance()).(*instancepb.Instance)
	if in.Name != "" && in.Name != name {
		return nil, errorf(codes.InvalidArgument, "Instance name %s does not match parent and instance id (%s)", in.Name, name)
	}
	in.Name = name
	cfgProject, err := configProject(in.Config)
	if err != nil {
		return nil, err
	}
	if cfgProject != project {
		return nil, errorf(codes.InvalidArgument, "Instance config %s is not in project %s", in.Config, project)
	}
	if in.NodeCount < 0 || in.ProcessingUnits < 0 {
		return nil, errorf(codes.InvalidArgument, "Invalid compute capacity: node_count %d, processing_units %d", in.NodeCount, in.ProcessingUnits)
	}
	switch {
	case in.NodeCount == 0 && in.ProcessingUnits == 0:
		in.NodeCount, in.ProcessingUnits = 1, 1000
	case in.ProcessingUnits == 0:
		in.ProcessingUnits = in.NodeCount * 1000
	case in.NodeCount == 0:
		in.NodeCount = in.ProcessingUnits / 1000
	}
	if in.DisplayName == "" {
		in.DisplayName = req.GetInstanceId()
	}
	now := timestamppb.Now()
	in.State = instancepb.Instance_READY
	in.CreateTime, in.UpdateTime = now, now
	if err := a.s.instances.create(in); err != nil {
		return nil, err
	}
	md := &instancepb.CreateInstanceMetadata{Instance: in, StartTime: now, EndTime: timestamppb.Now()}
	return a.s.ops.finish(name, "", md, in, nil)
}

func (a *instanceAdminService) GetInstance(_ context.Context, req *instancepb.GetInstanceRequest) (*instancepb.Instance, error) {
	if _, err := checkInstanceName(req.GetName()); err != nil {
		return nil, err
	}
	return a.s.instances.get(req.GetName())
}

// ListInstances ignores the filter: the emulator holds few instances and tests rarely filter.
func (a *instanceAdminService) ListInstances(_ context.Context, req *instancepb.ListInstancesRequest) (*instancepb.ListInstancesResponse, error) {
	project, err := parseProject(req.GetParent())
	if err != nil {
		return nil, err
	}
	all := a.s.instances.list(project)
	start, end, next, err := page(len(all), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &instancepb.ListInstancesResponse{Instances: all[start:end], NextPageToken: next}, nil
}

func (a *instanceAdminService) UpdateInstance(_ context.Context, req *instancepb.UpdateInstanceRequest) (*longrunningpb.Operation, error) {
	want := req.GetInstance()
	if want == nil {
		return nil, errorf(codes.InvalidArgument, "Missing instance")
	}
	if _, err := checkInstanceName(want.Name); err != nil {
		return nil, err
	}
	paths := req.GetFieldMask().GetPaths()
	if len(paths) == 0 {
		return nil, errorf(codes.InvalidArgument, "field_mask is required")
	}
	start := timestamppb.Now()
	in, err := a.s.instances.update(want.Name, func(in *instancepb.Instance) error {
		for _, p := range paths {
			switch p {
			case "display_name":
				in.DisplayName = want.DisplayName
			case "labels":
				in.Labels = want.Labels
			case "node_count":
				if want.NodeCount <= 0 {
					return errorf(codes.InvalidArgument, "Invalid node_count: %d", want.NodeCount)
				}
				in.NodeCount, in.ProcessingUnits = want.NodeCount, want.NodeCount*1000
			case "processing_units":
				if want.ProcessingUnits <= 0 {
					return errorf(codes.InvalidArgument, "Invalid processing_units: %d", want.ProcessingUnits)
				}
				in.ProcessingUnits, in.NodeCount = want.ProcessingUnits, want.ProcessingUnits/1000
			case "config":
				if want.Config != in.Config {
					return errorf(codes.InvalidArgument, "The instance config of an instance cannot be changed")
				}
			default:
				// Autoscaling, edition and the like have no effect on the emulator; accepting
				// them keeps provisioning code portable.
			}
		}
		in.UpdateTime = timestamppb.Now()
		return nil
	})
	if err != nil {
		return nil, err
	}
	md := &instancepb.UpdateInstanceMetadata{Instance: in, StartTime: start, EndTime: timestamppb.Now()}
	return a.s.ops.finish(in.Name, "", md, in, nil)
}

// DeleteInstance also drops the instance's databases and forgets their sessions.
func (a *instanceAdminService) DeleteInstance(_ context.Context, req *instancepb.DeleteInstanceRequest) (*emptypb.Empty, error) {
	name := req.GetName()
	if _, err := checkInstanceName(name); err != nil {
		return nil, err
	}
	a.s.adminMu.Lock()
	defer a.s.adminMu.Unlock()
	if a.s.anyDropProtected(name + "/databases/") {
		return nil, errorf(codes.FailedPrecondition, "Instance %s has databases with drop protection enabled", name)
	}
	if err := a.s.instances.delete(name); err != nil {
		return nil, err
	}
	a.s.eng.DropInstanceDatabases(name)
	a.s.sessions.dropUnder(name + "/databases/")
	a.s.forgetDatabasesUnder(name + "/databases/")
	return &emptypb.Empty{}, nil
}

// timeProto converts a time, leaving the zero time unset.
func timeProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
