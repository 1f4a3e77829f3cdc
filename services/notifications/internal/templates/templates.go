// Package templates renders the customer e-mails: one template per kind of e-mail (Name), each in
// Japanese and English, each with a subject, a plain-text body (text/template) and an HTML body
// (html/template, which escapes everything the data carries). The files are embedded from
// files/<language>/: <name>.txt defines "subject" and is the text body, <name>.html defines
// "content", which layout.html wraps; footer.txt and the layout hold what every e-mail ends with.
//
// The language is the contact's (notification.ParseLanguage): an unknown or missing one renders in
// Japanese, the shop's default. Amounts are written per currency (Money.String): yen have no minor
// unit (¥1,500), every other currency two decimals (1,234.50 USD). Times are written in Japan
// time, the shop's, in the language's style.
//
// The data of each template is a type of this package (OrderConfirmed, PaymentInstructions, ...);
// a field the template names and the data lacks is an error when the templates are parsed and
// rendered (tested for every template and language, with golden files under testdata).
package templates

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/spanmart/spanmart/services/notifications/internal/notification"
)

// Name is a template's name: the Template column of a notification.
type Name string

// The templates, one per kind of e-mail.
const (
	OrderConfirmedName      Name = "order_confirmed"      // order.confirmed: the lines and the total
	PaymentInstructionsName Name = "payment_instructions" // payment.pending: how to pay the slip
	OrderShippedName        Name = "order_shipped"        // order.shipped: carrier and tracking number
	OrderCancelledName      Name = "order_cancelled"      // order.cancelled: why, in the customer's words
	PaymentRefundedName     Name = "payment_refunded"     // payment.refunded: the amount
)

// Names lists every template.
var Names = []Name{OrderConfirmedName, PaymentInstructionsName, OrderShippedName, OrderCancelledName, PaymentRefundedName}

// Languages lists the languages every template is written in.
var Languages = []notification.Language{notification.Japanese, notification.English}

// Data is what one template renders: one of this package's data types.
type Data interface {
	Template() Name
}

// Money is an amount in minor units of a currency.
type Money struct {
	Minor    int64
	Currency string // ISO 4217, e.g. "JPY"
}

// String writes m for a customer: yen without a minor unit ("¥1,500"), any other currency with two
// decimals and its code ("1,234.50 USD").
func (m Money) String() string {
	sign, v := "", m.Minor
	if v < 0 {
		sign, v = "-", -v
	}
	cur := strings.ToUpper(m.Currency)
	if cur == "JPY" {
		return sign + "¥" + group(v)
	}
	return fmt.Sprintf("%s%s.%02d %s", sign, group(v/100), v%100, cur)
}

// group writes v with a comma every three digits.
func group(v int64) string {
	s := fmt.Sprint(v)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Line is an ordered SKU.
type Line struct {
	SKU       string
	Quantity  int64
	UnitPrice Money
}

// Amount is the line's price: quantity × unit price.
func (l Line) Amount() Money {
	return Money{Minor: l.Quantity * l.UnitPrice.Minor, Currency: l.UnitPrice.Currency}
}

// OrderConfirmed is the data of order_confirmed.
type OrderConfirmed struct {
	OrderID string
	Lines   []Line
	Total   Money
}

// PaymentInstructions is the data of payment_instructions: a konbini slip (Store, PaymentCode,
// ConfirmationCode, InstructionsURL) or the account of a bank transfer (Bank).
type PaymentInstructions struct {
	OrderID          string
	Amount           Money
	Method           string // "konbini" or "bank_transfer"
	Store            string // konbini chain, e.g. "lawson"
	PaymentCode      string
	ConfirmationCode string // "" when the chain asks for none
	InstructionsURL  string
	Bank             *BankAccount
	ExpiresAt        time.Time
}

// Konbini reports whether the slip is paid at a convenience store.
func (p PaymentInstructions) Konbini() bool { return p.Method == "konbini" }

// BankAccount is where a bank transfer goes.
type BankAccount struct {
	BankName, BranchName, AccountType, AccountNumber, AccountHolder string
}

// OrderShipped is the data of order_shipped.
type OrderShipped struct {
	OrderID        string
	Carrier        string // e.g. "yamato"; written by its name when known
	TrackingNumber string
}

// OrderCancelled is the data of order_cancelled.
type OrderCancelled struct {
	OrderID string
	Reason  string // orders' reason code; see the reason function of each language
}

// PaymentRefunded is the data of payment_refunded.
type PaymentRefunded struct {
	OrderID string
	Amount  Money
}

func (OrderConfirmed) Template() Name      { return OrderConfirmedName }
func (PaymentInstructions) Template() Name { return PaymentInstructionsName }
func (OrderShipped) Template() Name        { return OrderShippedName }
func (OrderCancelled) Template() Name      { return OrderCancelledName }
func (PaymentRefunded) Template() Name     { return PaymentRefundedName }

//go:embed files
var files embed.FS

// Renderer renders the embedded templates.
type Renderer struct {
	sets map[key]set
}

type key struct {
	name Name
	lang notification.Language
}

type set struct {
	text *texttemplate.Template
	html *htmltemplate.Template
}

// New parses every template in every language.
func New() (*Renderer, error) {
	r := &Renderer{sets: map[key]set{}}
	for _, lang := range Languages {
		funcs := funcsOf(lang)
		dir := "files/" + string(lang) + "/"
		for _, name := range Names {
			text, err := texttemplate.New(string(name)+".txt").Option("missingkey=error").Funcs(texttemplate.FuncMap(funcs)).
				ParseFS(files, dir+string(name)+".txt", dir+"footer.txt")
			if err != nil {
				return nil, fmt.Errorf("templates: %s/%s: %w", lang, name, err)
			}
			if text.Lookup("subject") == nil {
				return nil, fmt.Errorf("templates: %s/%s.txt defines no subject", lang, name)
			}
			html, err := htmltemplate.New("layout.html").Option("missingkey=error").Funcs(htmltemplate.FuncMap(funcs)).
				ParseFS(files, dir+"layout.html", dir+string(name)+".html")
			if err != nil {
				return nil, fmt.Errorf("templates: %s/%s: %w", lang, name, err)
			}
			if html.Lookup("content") == nil {
				return nil, fmt.Errorf("templates: %s/%s.html defines no content", lang, name)
			}
			r.sets[key{name, lang}] = set{text: text, html: html}
		}
	}
	return r, nil
}

var oneLine = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ")

// Render renders d's template in lang (DefaultLanguage when lang is not one of Languages).
func (r *Renderer) Render(lang notification.Language, d Data) (notification.Content, error) {
	s, ok := r.sets[key{d.Template(), lang}]
	if !ok {
		lang = notification.DefaultLanguage
		if s, ok = r.sets[key{d.Template(), lang}]; !ok {
			return notification.Content{}, fmt.Errorf("templates: no template %q", d.Template())
		}
	}
	var subject, text, html bytes.Buffer
	if err := s.text.ExecuteTemplate(&subject, "subject", d); err != nil {
		return notification.Content{}, fmt.Errorf("templates: %s/%s subject: %w", lang, d.Template(), err)
	}
	if err := s.text.Execute(&text, d); err != nil {
		return notification.Content{}, fmt.Errorf("templates: %s/%s text: %w", lang, d.Template(), err)
	}
	if err := s.html.Execute(&html, d); err != nil {
		return notification.Content{}, fmt.Errorf("templates: %s/%s HTML: %w", lang, d.Template(), err)
	}
	return notification.Content{
		// One line: a header value never carries a line break (no header injection from data).
		Subject: strings.TrimSpace(oneLine.Replace(subject.String())),
		Text:    strings.TrimSpace(text.String()) + "\n",
		HTML:    html.String(),
	}, nil
}
