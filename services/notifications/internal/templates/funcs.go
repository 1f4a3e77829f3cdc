package templates

import (
	"fmt"
	"time"

	"github.com/spanmart/spanmart/services/notifications/internal/notification"
)

// japanTime is the shop's time zone (fixed: Japan has no daylight saving time, and a fixed zone
// needs no time zone database in the container).
var japanTime = time.FixedZone("JST", 9*60*60)

// words is what a language calls the codes events carry.
type words struct {
	stores   map[string]string
	carriers map[string]string
	reasons  map[string]string
	// reasonOther is said for a cancellation reason not in reasons.
	reasonOther string
	// accountTypes names bank account types ("ordinary", "checking").
	accountTypes map[string]string
	when         func(t time.Time) string
}

var japaneseWeekdays = [...]string{"日", "月", "火", "水", "木", "金", "土"}

var vocabulary = map[notification.Language]words{
	notification.Japanese: {
		stores: map[string]string{
			"seven-eleven": "セブン-イレブン", "lawson": "ローソン", "family-mart": "ファミリーマート",
			"ministop": "ミニストップ", "daily-yamazaki": "デイリーヤマザキ", "seicomart": "セイコーマート",
		},
		carriers: map[string]string{
			"yamato": "ヤマト運輸", "sagawa": "佐川急便", "japan_post": "日本郵便", "japanpost": "日本郵便",
		},
		reasons: map[string]string{
			"customer_request":           "お客様のご依頼により、ご注文をキャンセルいたしました。",
			"payment_declined":           "お支払いが承認されませんでした。",
			"payment_insufficient_funds": "残高不足のため、お支払いが完了しませんでした。",
			"payment_expired":            "お支払い期限までにお支払いを確認できませんでした。",
			"out_of_stock":               "ご注文の商品の在庫を確保できませんでした。",
			"shipment_failed":            "配送上の問題により、商品をお届けできませんでした。",
		},
		reasonOther:  "ご注文の手続きを完了できませんでした。",
		accountTypes: map[string]string{"ordinary": "普通", "checking": "当座", "savings": "貯蓄"},
		when: func(t time.Time) string {
			t = t.In(japanTime)
			return fmt.Sprintf("%d年%d月%d日(%s) %02d:%02d", t.Year(), t.Month(), t.Day(), japaneseWeekdays[t.Weekday()], t.Hour(), t.Minute())
		},
	},
	notification.English: {
		stores: map[string]string{
			"seven-eleven": "7-Eleven", "lawson": "Lawson", "family-mart": "FamilyMart",
			"ministop": "Ministop", "daily-yamazaki": "Daily Yamazaki", "seicomart": "Seicomart",
		},
		carriers: map[string]string{
			"yamato": "Yamato Transport", "sagawa": "Sagawa Express", "japan_post": "Japan Post", "japanpost": "Japan Post",
		},
		reasons: map[string]string{
			"customer_request":           "You asked us to cancel your order.",
			"payment_declined":           "Your payment was declined.",
			"payment_insufficient_funds": "Your payment could not be completed because of insufficient funds.",
			"payment_expired":            "We did not receive your payment before the deadline.",
			"out_of_stock":               "Some of the items you ordered are out of stock.",
			"shipment_failed":            "We could not deliver your order because of a problem with the shipment.",
		},
		reasonOther:  "We could not complete your order.",
		accountTypes: map[string]string{"ordinary": "Ordinary", "checking": "Checking", "savings": "Savings"},
		when: func(t time.Time) string {
			return t.In(japanTime).Format("Mon, 2 Jan 2006 15:04 MST")
		},
	},
}

// funcsOf returns the functions the templates of lang call:
//
//	store "lawson"        the konbini chain's name
//	carrier "yamato"      the carrier's name
//	reason "out_of_stock" why the order was cancelled, a sentence
//	accountType "ordinary" the bank account type
//	when t                a time, in Japan time
//
// An unknown code is written as it is (a reason: a generic sentence), so a new code from another
// service renders rather than fails.
func funcsOf(lang notification.Language) map[string]any {
	w := vocabulary[lang]
	name := func(m map[string]string) func(string) string {
		return func(code string) string {
			if s, ok := m[code]; ok {
				return s
			}
			return code
		}
	}
	return map[string]any{
		"store":       name(w.stores),
		"carrier":     name(w.carriers),
		"accountType": name(w.accountTypes),
		"reason": func(code string) string {
			if s, ok := w.reasons[code]; ok {
				return s
			}
			return w.reasonOther
		},
		"when": w.when,
	}
}
