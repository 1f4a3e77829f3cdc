package store

import (
	"encoding/json"
	"fmt"
	"time"

	"cloud.google.com/go/spanner"

	"github.com/spanmart/spanmart/services/orders/internal/order"
)

// instructionsJSON is the Orders.PaymentInstructions column: the slip of a konbini or bank
// transfer payment, in the field names of the gateway's payment.pending "slip".
type instructionsJSON struct {
	Method           string     `json:"method"`
	Store            string     `json:"store,omitempty"`
	PaymentCode      string     `json:"payment_code,omitempty"`
	ConfirmationCode string     `json:"confirmation_code,omitempty"`
	InstructionsURL  string     `json:"instructions_url,omitempty"`
	Bank             *bankJSON  `json:"bank,omitempty"`
	ExpiresAt        *time.Time `json:"expires_at,omitempty"`
}

type bankJSON struct {
	BankName      string `json:"bank_name,omitempty"`
	BranchName    string `json:"branch_name,omitempty"`
	AccountType   string `json:"account_type,omitempty"`
	AccountNumber string `json:"account_number,omitempty"`
	AccountHolder string `json:"account_holder,omitempty"`
}

// instructionsColumn returns the column value of a slip; nil is NULL.
func instructionsColumn(in *order.PaymentInstructions) (spanner.NullJSON, error) {
	if in == nil {
		return spanner.NullJSON{}, nil
	}
	j := instructionsJSON{
		Method: string(in.Method), Store: in.Store, PaymentCode: in.PaymentCode,
		ConfirmationCode: in.ConfirmationCode, InstructionsURL: in.InstructionsURL,
	}
	if in.Bank != nil {
		j.Bank = &bankJSON{
			BankName: in.Bank.BankName, BranchName: in.Bank.BranchName, AccountType: in.Bank.AccountType,
			AccountNumber: in.Bank.AccountNumber, AccountHolder: in.Bank.AccountHolder,
		}
	}
	if !in.ExpiresAt.IsZero() {
		t := in.ExpiresAt.UTC()
		j.ExpiresAt = &t
	}
	// Marshalled here rather than by the client so that an encoding problem is this column's error.
	b, err := json.Marshal(j)
	if err != nil {
		return spanner.NullJSON{}, fmt.Errorf("payment instructions: %w", err)
	}
	return spanner.NullJSON{Value: json.RawMessage(b), Valid: true}, nil
}

// instructionsFromColumn reads the column; NULL (no slip yet, or an order placed before migration
// 0003) is nil.
func instructionsFromColumn(v spanner.NullJSON) (*order.PaymentInstructions, error) {
	if !v.Valid || v.Value == nil {
		return nil, nil
	}
	b, err := json.Marshal(v.Value)
	if err != nil {
		return nil, fmt.Errorf("payment instructions: %w", err)
	}
	var j instructionsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("payment instructions: %w", err)
	}
	in := &order.PaymentInstructions{
		Method: order.PaymentMethod(j.Method), Store: j.Store, PaymentCode: j.PaymentCode,
		ConfirmationCode: j.ConfirmationCode, InstructionsURL: j.InstructionsURL,
	}
	if j.Bank != nil {
		in.Bank = &order.BankAccount{
			BankName: j.Bank.BankName, BranchName: j.Bank.BranchName, AccountType: j.Bank.AccountType,
			AccountNumber: j.Bank.AccountNumber, AccountHolder: j.Bank.AccountHolder,
		}
	}
	if j.ExpiresAt != nil {
		in.ExpiresAt = j.ExpiresAt.UTC()
	}
	return in, nil
}
