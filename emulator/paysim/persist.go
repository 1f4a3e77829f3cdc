package paysim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/spanmart/spanmart/internal/atomicfile"
)

// Persistence (Options.DataDir). The whole state is one JSON snapshot, DataDir/snapshotFile,
// rewritten after every change while s.mu is held: the request that made the change is
// answered only once the new file is in place (temporary file, fsync, rename, fsync of the
// directory), so a change a client was told about survives a kill -9, and a reader never sees
// a half-written file. One file rewritten whole is the simplest format that is always
// consistent; the price is a write per change that grows with the state (README.md has the
// numbers).

// snapshotFile is the name, inside Options.DataDir, of the sandbox's state.
const snapshotFile = "paysim.json"

// snapshotVersion is the format of snapshotFile. Start refuses a file of another version
// rather than guess at it: a sandbox that forgot its payments silently is what DataDir exists
// to prevent.
const snapshotVersion = 1

// errNotSaved marks a change made in memory that could not be written to DataDir.
var errNotSaved = errors.New("the sandbox could not save its state")

// snapshot is the content of snapshotFile: everything a restarted sandbox needs to go on.
// Objects that refer to each other do so by id. The API and webhook faults are not in it (a
// restart clears them), nor the webhook delivery log (a restart starts a new one).
//
// Start decodes the file into snapshot; encodeSnapshotLocked writes it as the snapshotHead
// followed by the lists, each object's record copied from its memo.
type snapshot struct {
	snapshotHead
	PaymentMethods []snapPaymentMethod `json:"payment_methods"`
	PaymentIntents []snapPaymentIntent `json:"payment_intents"` // creation order
	Charges        []snapCharge        `json:"charges"`
	Refunds        []snapRefund        `json:"refunds"` // creation order
	Events         []snapEvent         `json:"events"`  // creation order
	Idempotency    []snapIdempotency   `json:"idempotency"`
	KomojuPayments []snapKomojuPayment `json:"komoju_payments"` // creation order
	KomojuEvents   []snapKomojuEvent   `json:"komoju_events"`   // creation order
}

type snapshotHead struct {
	Version int `json:"version"`
	// Now is the virtual time of the write and ClockOffset the virtual clock's lead on the wall
	// clock: the clock runs on from the offset (it kept running while the sandbox was down, as
	// a provider's does) but never earlier than Now, should the wall clock have gone back.
	Now         time.Time             `json:"now"`
	ClockOffset time.Duration         `json:"clock_offset_ns"`
	Wallets     map[string]snapWallet `json:"wallets"`
	// Undelivered are the events (of either dialect) whose webhook delivery had not ended;
	// Start delivers them again.
	Undelivered []string `json:"undelivered"`
}

// memo is an object's snapshot record as last encoded, so that a write encodes again only the
// objects that changed since the one before (encoding everything would be most of the cost
// of a write). key is every field of the record that can change, compared by value, so no
// code that changes an object has to remember to invalidate its memo.
type memo[K comparable] struct {
	key  K
	json []byte
}

// record returns the JSON of record(), encoded again only when key differs from the last call's.
func (m *memo[K]) record(key K, record func() any) []byte {
	if m.json == nil || m.key != key {
		m.key, m.json = key, mustJSON(record())
	}
	return m.json
}

// mapID identifies a metadata map in a memo key. Metadata is set when an object is created and
// never changed in place (no endpoint updates it), so the map's identity stands for its content.
func mapID(m any) uintptr { return reflect.ValueOf(m).Pointer() }

type snapPaymentMethod struct {
	ID      string    `json:"id"`
	Token   string    `json:"token"` // the test token (pm_card_visa) that decides what the card does
	Created time.Time `json:"created"`
}

type snapPaymentIntent struct {
	paymentIntentFields
	Metadata map[string]string `json:"metadata,omitempty"`
}

// paymentIntentFields are a PaymentIntent's fields but its metadata: comparable, a memo key.
type paymentIntentFields struct {
	ID               string `json:"id"`
	ClientSecret     string `json:"client_secret"`
	Amount           int64  `json:"amount"`
	AmountCapturable int64  `json:"amount_capturable"`
	AmountReceived   int64  `json:"amount_received"`
	Currency         string `json:"currency"`
	CaptureMethod    string `json:"capture_method"`
	Description      string `json:"description,omitempty"`
	Status           status `json:"status"`
	PaymentMethod    string `json:"payment_method,omitempty"`
	// LastError is last_payment_error, Stripe's error object, sent with LastErrorStatus. A
	// PaymentIntent's error is replaced, never changed in place, so the pointer is a key.
	LastError          *apiError `json:"last_error,omitempty"`
	LastErrorStatus    int       `json:"last_error_status,omitempty"`
	LatestCharge       string    `json:"latest_charge,omitempty"`
	Created            time.Time `json:"created"`
	AuthorizedAt       time.Time `json:"authorized_at"`
	CanceledAt         time.Time `json:"canceled_at"`
	CancellationReason string    `json:"cancellation_reason,omitempty"`
	ReturnURL          string    `json:"return_url,omitempty"`
}

type intentMemoKey struct {
	fields   paymentIntentFields
	metadata uintptr
}

// snapCharge is comparable: it is its own memo key.
type snapCharge struct {
	ID             string    `json:"id"`
	Amount         int64     `json:"amount"`
	AmountCaptured int64     `json:"amount_captured"`
	AmountRefunded int64     `json:"amount_refunded"`
	Currency       string    `json:"currency"`
	Paid           bool      `json:"paid"`
	Captured       bool      `json:"captured"`
	PaymentIntent  string    `json:"payment_intent"`
	PaymentMethod  string    `json:"payment_method"`
	FailureCode    string    `json:"failure_code,omitempty"`
	FailureMessage string    `json:"failure_message,omitempty"`
	Created        time.Time `json:"created"`
}

type snapRefund struct {
	ID            string            `json:"id"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Charge        string            `json:"charge"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        string            `json:"reason,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Created       time.Time         `json:"created"`
}

type snapEvent struct {
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Created         time.Time       `json:"created"`
	Object          json.RawMessage `json:"object"`
	RequestID       string          `json:"request_id,omitempty"`
	IdempotencyKey  string          `json:"idempotency_key,omitempty"`
	PendingWebhooks int             `json:"pending_webhooks"`
}

// snapIdempotency is a saved response. Body is JSON, kept byte for byte (encoding/json keeps a
// compact RawMessage as it is), so a replay after a restart answers exactly what the first
// request got.
type snapIdempotency struct {
	Dialect   string          `json:"dialect"`
	Account   string          `json:"account"` // accountOf the secret key
	Key       string          `json:"key"`
	Endpoint  string          `json:"endpoint"`
	Params    string          `json:"params"`
	Status    int             `json:"status"`
	Body      json.RawMessage `json:"body"`
	RequestID string          `json:"request_id"`
	Created   time.Time       `json:"created"`
}

type snapKomojuPayment struct {
	komojuPaymentFields
	Metadata       map[string]any            `json:"metadata,omitempty"`
	Refunds        []snapKomojuRefund        `json:"refunds,omitempty"`
	RefundRequests []snapKomojuRefundRequest `json:"refund_requests,omitempty"`
}

// komojuPaymentFields are a KOMOJU payment's fields but its metadata and refunds: comparable,
// a memo key.
type komojuPaymentFields struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Amount           int64           `json:"amount"`
	Currency         string          `json:"currency"`
	ExternalOrderNum string          `json:"external_order_num,omitempty"`
	Description      string          `json:"description,omitempty"`
	ManualCapture    bool            `json:"manual_capture"`
	Status           komojuStatus    `json:"status"`
	Created          time.Time       `json:"created"`
	AuthorizedAt     time.Time       `json:"authorized_at"`
	CapturedAt       time.Time       `json:"captured_at"`
	Deadline         time.Time       `json:"deadline"`
	AmountRefunded   int64           `json:"amount_refunded"`
	FailureReason    string          `json:"failure_reason,omitempty"`
	Email            string          `json:"email,omitempty"`
	Phone            string          `json:"phone,omitempty"`
	Store            string          `json:"store,omitempty"`
	Receipt          string          `json:"receipt,omitempty"`
	ConfirmationCode string          `json:"confirmation_code,omitempty"`
	Bank             snapBankAccount `json:"bank,omitzero"`
	InstructionsURL  string          `json:"instructions_url,omitempty"`
	Customer         string          `json:"customer,omitempty"`
}

// komojuMemoKey is a KOMOJU payment's memo key; refunds and refund requests are only ever
// appended, so their number stands for them, and a request changes only once, from pending to
// completed or rejected, so the number of those that did stands for their statuses.
type komojuMemoKey struct {
	fields         komojuPaymentFields
	metadata       uintptr
	refunds        int
	refundRequests int
	settled        int
}

type snapBankAccount struct {
	BankName      string `json:"bank_name"`
	BankCode      string `json:"bank_code"`
	BranchName    string `json:"branch_name"`
	BranchNumber  string `json:"branch_number"`
	AccountType   string `json:"account_type"`
	AccountNumber string `json:"account_number"`
	AccountName   string `json:"account_name"`
}

type snapKomojuRefund struct {
	ID          string    `json:"id"`
	Amount      int64     `json:"amount"`
	Description string    `json:"description,omitempty"`
	Created     time.Time `json:"created"`
}

type snapKomojuRefundRequest struct {
	ID          string    `json:"id"`
	Amount      int64     `json:"amount"`
	Description string    `json:"description,omitempty"`
	Status      string    `json:"status"`
	Created     time.Time `json:"created"`
	PayoutAt    time.Time `json:"payout_at"`
}

type snapKomojuEvent struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Created time.Time       `json:"created"`
	Data    json.RawMessage `json:"data"`
	Reason  string          `json:"reason,omitempty"`
}

type snapWallet struct {
	Available int64 `json:"available"`
	Held      int64 `json:"held"`
}

// openDataDir creates dir if needed, loads its snapshot into s (a missing file is an empty
// sandbox) and writes it back at once, so that an unwritable dir fails Start rather than the
// first request. It returns the deliveries of the events that were undelivered, for Start to
// send once it serves. s is not serving yet.
func (s *Server) openDataDir(dir string) ([]message, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	s.dataPath = filepath.Join(dir, snapshotFile)
	data, err := os.ReadFile(s.dataPath)
	var requeued []message
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("load %s: %w", s.dataPath, err)
	default:
		if requeued, err = s.load(data); err != nil {
			return nil, fmt.Errorf("load %s: %w", s.dataPath, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dirty = true
	if err := s.saveLocked(); err != nil {
		return nil, err
	}
	return requeued, nil
}

// saveLocked writes the state to dataPath if it changed since the last write.
func (s *Server) saveLocked() error {
	if s.dataPath == "" || !s.dirty {
		return nil
	}
	if s.closed {
		return fmt.Errorf("%w in %s: the sandbox is closed", errNotSaved, s.dataPath)
	}
	s.saveBuf = s.encodeSnapshotLocked(s.saveBuf[:0])
	if err := atomicfile.Write(s.dataPath, s.saveBuf); err != nil {
		return fmt.Errorf("%w in %s: %v", errNotSaved, s.dataPath, err)
	}
	s.dirty = false
	return nil
}

// encodeSnapshotLocked appends the JSON of the snapshot to buf: its head, then each list from
// its objects' memos. Objects kept in maps (payment methods, charges, idempotency records) are
// written in map order: sorting them would cost a write more than copying them does.
func (s *Server) encodeSnapshotLocked(buf []byte) []byte {
	head := snapshotHead{Version: snapshotVersion, Now: s.nowLocked(), ClockOffset: s.offset,
		Wallets: map[string]snapWallet{}, Undelivered: slices.Sorted(maps.Keys(s.undelivered))}
	for customer, w := range s.komoju.wallets {
		head.Wallets[customer] = snapWallet{Available: w.available, Held: w.held}
	}
	if head.Undelivered == nil {
		head.Undelivered = []string{}
	}
	h := mustJSON(head)
	buf = append(buf, h[:len(h)-1]...) // without its closing brace

	buf = appendList(buf, "payment_methods", maps.Values(s.pms), (*paymentMethod).record)
	buf = appendList(buf, "payment_intents", idsIn(s.order, s.intents), (*paymentIntent).record)
	buf = appendList(buf, "charges", maps.Values(s.charges), (*charge).record)
	buf = appendList(buf, "refunds", idsIn(s.rorder, s.refunds), (*refund).record)
	buf = appendList(buf, "events", slices.Values(s.events), (*event).record)
	buf = appendList(buf, "idempotency", maps.Keys(s.idem), func(k idemKey) []byte { return s.idem[k].record(k) })
	buf = appendList(buf, "komoju_payments", idsIn(s.komoju.order, s.komoju.payments), (*komojuPayment).record)
	buf = appendList(buf, "komoju_events", slices.Values(s.komoju.events), (*komojuEvent).record)
	return append(buf, '}')
}

// appendList appends `,"name":[...]` to buf, the JSON of each of objects given by record.
func appendList[T any](buf []byte, name string, objects iter.Seq[T], record func(T) []byte) []byte {
	buf = append(buf, `,"`+name+`":[`...)
	first := true
	for o := range objects {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, record(o)...)
	}
	return append(buf, ']')
}

// idsIn yields the objects of byID named by ids, in that order.
func idsIn[T any](ids []string, byID map[string]T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, id := range ids {
			if !yield(byID[id]) {
				return
			}
		}
	}
}

// The records of the objects. Payment methods, refunds, events and idempotency records never
// change once made: their memo key is empty, so each is encoded once.

func (pm *paymentMethod) record() []byte {
	return pm.saved.record(struct{}{}, func() any { return snapPaymentMethod{ID: pm.id, Token: pm.token, Created: pm.created} })
}

func (pi *paymentIntent) fields() paymentIntentFields {
	f := paymentIntentFields{
		ID: pi.id, ClientSecret: pi.clientSecret, Amount: pi.amount, AmountCapturable: pi.amountCapturable,
		AmountReceived: pi.amountReceived, Currency: pi.currency, CaptureMethod: pi.captureMethod,
		Description: pi.description, Status: pi.status, LastError: pi.lastError, Created: pi.created,
		AuthorizedAt: pi.authorizedAt, CanceledAt: pi.canceledAt, CancellationReason: pi.cancellationReason,
		ReturnURL: pi.returnURL,
	}
	if pi.paymentMethod != nil {
		f.PaymentMethod = pi.paymentMethod.id
	}
	if pi.latestCharge != nil {
		f.LatestCharge = pi.latestCharge.id
	}
	if pi.lastError != nil {
		f.LastErrorStatus = pi.lastError.status
	}
	return f
}

func (pi *paymentIntent) record() []byte {
	f := pi.fields()
	return pi.saved.record(intentMemoKey{f, mapID(pi.metadata)}, func() any { return snapPaymentIntent{f, pi.metadata} })
}

func (ch *charge) record() []byte {
	r := snapCharge{
		ID: ch.id, Amount: ch.amount, AmountCaptured: ch.amountCaptured, AmountRefunded: ch.amountRefunded,
		Currency: ch.currency, Paid: ch.paid, Captured: ch.captured, PaymentIntent: ch.intentID, PaymentMethod: ch.pm.id,
		FailureCode: ch.failureCode, FailureMessage: ch.failureMessage, Created: ch.created,
	}
	return ch.saved.record(r, func() any { return r })
}

func (rf *refund) record() []byte {
	return rf.saved.record(struct{}{}, func() any {
		return snapRefund{ID: rf.id, Amount: rf.amount, Currency: rf.currency, Charge: rf.chargeID, PaymentIntent: rf.intentID,
			Reason: rf.reason, Metadata: rf.metadata, Created: rf.created}
	})
}

func (e *event) record() []byte {
	return e.saved.record(struct{}{}, func() any {
		return snapEvent{ID: e.id, Type: e.typ, Created: e.created, Object: e.object, RequestID: e.requestID,
			IdempotencyKey: e.idemKey, PendingWebhooks: e.webhooks}
	})
}

func (rec *idemRecord) record(k idemKey) []byte {
	return rec.saved.record(struct{}{}, func() any {
		return snapIdempotency{Dialect: k.dialect, Account: k.account, Key: k.key, Endpoint: rec.endpoint,
			Params: rec.params, Status: rec.status, Body: rec.body, RequestID: rec.requestID, Created: rec.created}
	})
}

func (p *komojuPayment) record() []byte {
	b := p.bank
	f := komojuPaymentFields{
		ID: p.id, Type: p.typ, Amount: p.amount, Currency: p.currency, ExternalOrderNum: p.externalOrderNum,
		Description: p.description, ManualCapture: p.manualCapture, Status: p.status, Created: p.created,
		AuthorizedAt: p.authorizedAt, CapturedAt: p.capturedAt, Deadline: p.deadline, AmountRefunded: p.amountRefunded,
		FailureReason: p.failureReason, Email: p.email, Phone: p.phone, Store: p.store, Receipt: p.receipt,
		ConfirmationCode: p.confirmationCode, InstructionsURL: p.instructionsURL, Customer: p.customer,
		Bank: snapBankAccount{BankName: b.bankName, BankCode: b.bankCode, BranchName: b.branchName,
			BranchNumber: b.branchNumber, AccountType: b.accountType, AccountNumber: b.accountNumber, AccountName: b.accountName},
	}
	settled := 0
	for _, rr := range p.refundRequests {
		if rr.status != refundRequestPending {
			settled++
		}
	}
	return p.saved.record(komojuMemoKey{f, mapID(p.metadata), len(p.refunds), len(p.refundRequests), settled}, func() any {
		r := snapKomojuPayment{komojuPaymentFields: f, Metadata: p.metadata}
		for _, rf := range p.refunds {
			r.Refunds = append(r.Refunds, snapKomojuRefund{ID: rf.id, Amount: rf.amount, Description: rf.description, Created: rf.created})
		}
		for _, rr := range p.refundRequests {
			r.RefundRequests = append(r.RefundRequests, snapKomojuRefundRequest{ID: rr.id, Amount: rr.amount,
				Description: rr.description, Status: rr.status, Created: rr.created, PayoutAt: rr.payoutAt})
		}
		return r
	})
}

func (e *komojuEvent) record() []byte {
	return e.saved.record(struct{}{}, func() any {
		return snapKomojuEvent{ID: e.id, Type: e.typ, Created: e.created, Data: e.data, Reason: e.reason}
	})
}

// load replaces s's state (a fresh sandbox's) with the snapshot in data and returns the
// deliveries of its undelivered events, oldest first (an event whose dialect now has no webhook
// URL is no longer waiting for one). A reference to an object the snapshot lacks makes the
// file corrupt.
func (s *Server) load(data []byte) ([]message, error) {
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a paysim snapshot: %w", err)
	}
	switch {
	case head.Version == nil:
		return nil, fmt.Errorf("not a paysim snapshot: no version")
	case *head.Version != snapshotVersion:
		return nil, fmt.Errorf("snapshot version %d, this paysim reads version %d only", *head.Version, snapshotVersion)
	}
	var snap snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("not a paysim snapshot: %w", err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset = snap.ClockOffset
	if now := time.Now(); now.Add(s.offset).Before(snap.Now) {
		s.offset = snap.Now.Sub(now)
	}
	for _, sp := range snap.PaymentMethods {
		card, ok := testCards[sp.Token]
		if !ok {
			return nil, fmt.Errorf("payment method %s: unknown test token %q", sp.ID, sp.Token)
		}
		s.pms[sp.ID] = &paymentMethod{id: sp.ID, token: sp.Token, card: card, created: sp.Created}
	}
	for _, sc := range snap.Charges {
		pm, ok := s.pms[sc.PaymentMethod]
		if !ok {
			return nil, fmt.Errorf("charge %s: no payment method %s", sc.ID, sc.PaymentMethod)
		}
		s.charges[sc.ID] = &charge{
			id: sc.ID, amount: sc.Amount, amountCaptured: sc.AmountCaptured, amountRefunded: sc.AmountRefunded,
			currency: sc.Currency, paid: sc.Paid, captured: sc.Captured, intentID: sc.PaymentIntent, pm: pm,
			failureCode: sc.FailureCode, failureMessage: sc.FailureMessage, created: sc.Created,
		}
	}
	for _, sp := range snap.PaymentIntents {
		pi := &paymentIntent{
			id: sp.ID, clientSecret: sp.ClientSecret, amount: sp.Amount, amountCapturable: sp.AmountCapturable,
			amountReceived: sp.AmountReceived, currency: sp.Currency, captureMethod: sp.CaptureMethod,
			description: sp.Description, metadata: sp.Metadata, status: sp.Status, created: sp.Created,
			authorizedAt: sp.AuthorizedAt, canceledAt: sp.CanceledAt, cancellationReason: sp.CancellationReason,
			returnURL: sp.ReturnURL,
		}
		if sp.PaymentMethod != "" {
			if pi.paymentMethod = s.pms[sp.PaymentMethod]; pi.paymentMethod == nil {
				return nil, fmt.Errorf("payment intent %s: no payment method %s", sp.ID, sp.PaymentMethod)
			}
		}
		if sp.LatestCharge != "" {
			if pi.latestCharge = s.charges[sp.LatestCharge]; pi.latestCharge == nil {
				return nil, fmt.Errorf("payment intent %s: no charge %s", sp.ID, sp.LatestCharge)
			}
		}
		if sp.LastError != nil {
			pi.lastError = sp.LastError
			pi.lastError.status = sp.LastErrorStatus
		}
		s.intents[pi.id] = pi
		s.order = append(s.order, pi.id)
	}
	for _, sr := range snap.Refunds {
		s.refunds[sr.ID] = &refund{id: sr.ID, amount: sr.Amount, currency: sr.Currency, chargeID: sr.Charge,
			intentID: sr.PaymentIntent, reason: sr.Reason, metadata: sr.Metadata, created: sr.Created}
		s.rorder = append(s.rorder, sr.ID)
	}
	for _, se := range snap.Events {
		e := &event{id: se.ID, typ: se.Type, created: se.Created, object: se.Object, requestID: se.RequestID,
			idemKey: se.IdempotencyKey, webhooks: se.PendingWebhooks}
		s.events = append(s.events, e)
		s.byEvent[e.id] = e
	}
	for _, si := range snap.Idempotency {
		s.idem[idemKey{si.Dialect, si.Account, si.Key}] = &idemRecord{endpoint: si.Endpoint, params: si.Params,
			status: si.Status, body: si.Body, requestID: si.RequestID, created: si.Created}
	}

	k := newKomojuState(nil)
	for _, sp := range snap.KomojuPayments {
		p := &komojuPayment{
			id: sp.ID, typ: sp.Type, amount: sp.Amount, currency: sp.Currency, externalOrderNum: sp.ExternalOrderNum,
			description: sp.Description, metadata: sp.Metadata, manualCapture: sp.ManualCapture, status: sp.Status,
			created: sp.Created, authorizedAt: sp.AuthorizedAt, capturedAt: sp.CapturedAt, deadline: sp.Deadline,
			amountRefunded: sp.AmountRefunded, failureReason: sp.FailureReason, email: sp.Email, phone: sp.Phone,
			store: sp.Store, receipt: sp.Receipt, confirmationCode: sp.ConfirmationCode, instructionsURL: sp.InstructionsURL,
			customer: sp.Customer,
		}
		b := sp.Bank
		p.bank = bankAccount{bankName: b.BankName, bankCode: b.BankCode, branchName: b.BranchName,
			branchNumber: b.BranchNumber, accountType: b.AccountType, accountNumber: b.AccountNumber, accountName: b.AccountName}
		for _, r := range sp.Refunds {
			p.refunds = append(p.refunds, komojuRefund{id: r.ID, amount: r.Amount, description: r.Description, created: r.Created})
		}
		for _, r := range sp.RefundRequests {
			switch r.Status {
			case refundRequestPending, refundRequestCompleted, refundRequestRejected:
			default:
				return nil, fmt.Errorf("KOMOJU payment %s: refund request %s has status %q", sp.ID, r.ID, r.Status)
			}
			p.refundRequests = append(p.refundRequests, &komojuRefundRequest{id: r.ID, amount: r.Amount,
				description: r.Description, status: r.Status, created: r.Created, payoutAt: r.PayoutAt})
		}
		k.payments[p.id] = p
		k.order = append(k.order, p.id)
	}
	for _, se := range snap.KomojuEvents {
		e := &komojuEvent{id: se.ID, typ: se.Type, created: se.Created, data: se.Data, reason: se.Reason}
		k.events = append(k.events, e)
		k.byEvent[e.id] = e
	}
	for customer, w := range snap.Wallets {
		k.wallets[customer] = &wallet{available: w.Available, held: w.Held}
	}
	s.komoju = k
	for _, id := range s.order {
		s.watchIntentLocked(s.intents[id])
	}
	for _, id := range k.order {
		s.watchKomojuLocked(k.payments[id])
		s.watchRefundLocked(k.payments[id])
	}
	for key, rec := range s.idem {
		s.watchIdemLocked(key, rec)
	}

	for _, id := range snap.Undelivered {
		if s.byEvent[id] == nil && s.komoju.byEvent[id] == nil {
			return nil, fmt.Errorf("undelivered event %s: no such event", id)
		}
		s.undelivered[id] = true
	}
	var msgs []message
	for _, e := range s.events {
		if s.undelivered[e.id] {
			msgs = append(msgs, s.stripeMessage(e))
		}
	}
	for _, e := range s.komoju.events {
		if s.undelivered[e.id] {
			msgs = append(msgs, s.komojuMessage(e))
		}
	}
	for _, m := range msgs {
		if m.to.url == "" {
			delete(s.undelivered, m.eventID)
		}
	}
	return msgs, nil
}
