package sqlfuncs

import (
	"database/sql/driver"
	"math"
	"math/big"
	"strings"

	"github.com/spanmart/spanmart/emulator/spanneremu/internal/spantype"
)

// numericFn declares a Go function over one NUMERIC argument plus optional INT64 ones.
func numericFn(goName string, nargs int32, f func(r *big.Rat, rest []int64) (*big.Rat, error)) {
	defStrict(goName, nargs, func(a []driver.Value) (driver.Value, error) {
		r, err := asNumeric(a[0])
		if err != nil {
			return nil, err
		}
		rest := make([]int64, len(a)-1)
		for i, v := range a[1:] {
			if rest[i], err = asInt(v); err != nil {
				return nil, err
			}
		}
		out, err := f(r, rest)
		if err != nil {
			return nil, err
		}
		return storeNumeric(out)
	})
}

// floatFn declares a Go function over FLOAT64 arguments. A finite input giving an infinite
// result is an overflow error, as in GoogleSQL.
func floatFn(sqlName, goName string, nargs int32, f func(x []float64) (float64, error)) func([]driver.Value) (driver.Value, error) {
	impl := func(a []driver.Value) (driver.Value, error) {
		xs := make([]float64, len(a))
		finite := true
		for i, v := range a {
			x, err := asFloat(v)
			if err != nil {
				return nil, err
			}
			xs[i] = x
			finite = finite && !math.IsInf(x, 0)
		}
		y, err := f(xs)
		if err != nil {
			return nil, err
		}
		if finite && math.IsInf(y, 0) {
			return nil, outOfRange("Floating point overflow in function: %s", sqlName)
		}
		return storeFloat(y), nil
	}
	defStrict(goName, nargs, impl)
	return impl
}

// numericViaFloat declares goName_numeric, the NUMERIC overload of a FLOAT64 function: it
// computes in FLOAT64 and rounds the result to NUMERIC's 9 decimal places.
func numericViaFloat(goName string, nargs int32, floatImpl func([]driver.Value) (driver.Value, error)) {
	defStrict(goName+"_numeric", nargs, func(a []driver.Value) (driver.Value, error) {
		fa := make([]driver.Value, len(a))
		for i, v := range a {
			r, err := asNumeric(v)
			if err != nil {
				return nil, err
			}
			fa[i], _ = r.Float64()
		}
		v, err := floatImpl(fa)
		if err != nil {
			return nil, err
		}
		f, err := asFloat(v)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, outOfRange("numeric overflow in %s", strings.ToUpper(goName[4:]))
		}
		return storeNumeric(new(big.Rat).SetFloat64(f))
	})
}

// roundHalfAway rounds x to d decimal places, half away from zero.
func roundHalfAway(x float64, d int64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	if d > 330 {
		return x
	}
	if d < -330 {
		return 0 * x
	}
	p := math.Pow(10, float64(d))
	y := math.Round(x * p)
	if math.IsInf(x*p, 0) {
		return x
	}
	return y / p
}

func truncDigits(x float64, d int64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || d > 330 {
		return x
	}
	p := math.Pow(10, float64(d))
	if math.IsInf(x*p, 0) {
		return x
	}
	return math.Trunc(x*p) / p
}

// ratRound rounds r to d decimal places half away from zero (trunc=false) or toward zero.
func ratRound(r *big.Rat, d int64, trunc bool) *big.Rat {
	if d > 9 {
		d = 9
	}
	if d < -38 {
		return new(big.Rat)
	}
	var q *big.Int
	scale := new(big.Rat).SetFrac(big.NewInt(1), big.NewInt(1))
	if d >= 0 {
		scale.SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(d), nil))
	} else {
		scale.SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(-d), nil))
	}
	scaled := new(big.Rat).Mul(r, scale)
	if trunc {
		q = new(big.Int).Quo(scaled.Num(), scaled.Denom())
	} else {
		q = roundRat(scaled, 0)
	}
	return new(big.Rat).Quo(new(big.Rat).SetInt(q), scale)
}

func ratFloor(r *big.Rat) *big.Rat {
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for a positive denominator
	return new(big.Rat).SetInt(q)
}

func init() {
	defFunc("ABS",
		sig(tI, goCall("spf_abs_int64"), tI),
		sig(tN, goCall("spf_abs_numeric"), tN),
		sig(tF, goCall("spf_abs_float64"), tF))
	defStrict("spf_abs_int64", 1, func(a []driver.Value) (driver.Value, error) {
		n, err := asInt(a[0])
		if n == math.MinInt64 {
			return nil, outOfRange("int64 overflow: ABS(%d)", n)
		}
		if n < 0 {
			n = -n
		}
		return n, err
	})
	numericFn("spf_abs_numeric", 1, func(r *big.Rat, _ []int64) (*big.Rat, error) { return r.Abs(r), nil })
	floatFn("ABS", "spf_abs_float64", 1, func(x []float64) (float64, error) { return math.Abs(x[0]), nil })

	defFunc("SIGN",
		sig(tI, goCall("spf_sign_int64"), tI),
		sig(tN, goCall("spf_sign_numeric"), tN),
		sig(tF, goCall("spf_sign_float64"), tF))
	defStrict("spf_sign_int64", 1, func(a []driver.Value) (driver.Value, error) {
		n, err := asInt(a[0])
		return int64(cmp3(n < 0, n > 0)), err
	})
	numericFn("spf_sign_numeric", 1, func(r *big.Rat, _ []int64) (*big.Rat, error) { return big.NewRat(int64(r.Sign()), 1), nil })
	floatFn("SIGN", "spf_sign_float64", 1, func(x []float64) (float64, error) {
		if math.IsNaN(x[0]) {
			return x[0], nil
		}
		return float64(cmp3(x[0] < 0, x[0] > 0)), nil
	})

	// ROUND and TRUNC take an optional number of digits.
	for _, name := range []string{"ROUND", "TRUNC"} {
		lname := strings.ToLower(name)
		defFunc(name,
			sig(tF, goCall("spf_"+lname+"_float64"), tF, tI).opt(1),
			sig(tN, goCall("spf_"+lname+"_numeric"), tN, tI).opt(1))
		trunc := name == "TRUNC"
		floatFn(name, "spf_"+lname+"_float64", -1, func(x []float64) (float64, error) {
			d := int64(0)
			if len(x) > 1 {
				d = int64(x[1])
			}
			if trunc {
				return truncDigits(x[0], d), nil
			}
			return roundHalfAway(x[0], d), nil
		})
		numericFn("spf_"+lname+"_numeric", -1, func(r *big.Rat, rest []int64) (*big.Rat, error) {
			d := int64(0)
			if len(rest) > 0 {
				d = rest[0]
			}
			return ratRound(r, d, trunc), nil
		})
	}
	for _, name := range []string{"CEIL", "CEILING", "FLOOR"} {
		floor := name == "FLOOR"
		goName := "spf_floor"
		if !floor {
			goName = "spf_ceil"
		}
		defFunc(name,
			sig(tF, goCall(goName+"_float64"), tF),
			sig(tN, goCall(goName+"_numeric"), tN))
		if name == "CEILING" {
			continue
		}
		floatFn(name, goName+"_float64", 1, func(x []float64) (float64, error) {
			if floor {
				return math.Floor(x[0]), nil
			}
			return math.Ceil(x[0]), nil
		})
		numericFn(goName+"_numeric", 1, func(r *big.Rat, _ []int64) (*big.Rat, error) {
			if floor {
				return ratFloor(r), nil
			}
			return new(big.Rat).Neg(ratFloor(new(big.Rat).Neg(r))), nil
		})
	}

	unaryFloat := map[string]func(x float64) (float64, error){
		"SQRT": func(x float64) (float64, error) {
			if x < 0 {
				return 0, outOfRange("Argument to SQRT cannot be negative: %s", spantype.FormatFloat(x, 64))
			}
			return math.Sqrt(x), nil
		},
		"EXP": func(x float64) (float64, error) { return math.Exp(x), nil },
		"LN": func(x float64) (float64, error) {
			if x <= 0 {
				return 0, outOfRange("Argument to LN must be positive: %s", spantype.FormatFloat(x, 64))
			}
			return math.Log(x), nil
		},
		"LOG10": func(x float64) (float64, error) {
			if x <= 0 {
				return 0, outOfRange("Argument to LOG10 must be positive: %s", spantype.FormatFloat(x, 64))
			}
			return math.Log10(x), nil
		},
		"SIN":  func(x float64) (float64, error) { return math.Sin(x), nil },
		"COS":  func(x float64) (float64, error) { return math.Cos(x), nil },
		"TAN":  func(x float64) (float64, error) { return math.Tan(x), nil },
		"ASIN": func(x float64) (float64, error) { return math.Asin(x), nil },
		"ACOS": func(x float64) (float64, error) { return math.Acos(x), nil },
		"ATAN": func(x float64) (float64, error) { return math.Atan(x), nil },
	}
	// These also have a NUMERIC overload in GoogleSQL.
	withNumeric := map[string]bool{"SQRT": true, "EXP": true, "LN": true, "LOG10": true}
	for name, f := range unaryFloat {
		goName := "spf_" + strings.ToLower(name)
		impl := floatFn(name, goName, 1, func(x []float64) (float64, error) { return f(x[0]) })
		if !withNumeric[name] {
			defFunc(name, sig(tF, goCall(goName), tF))
			continue
		}
		defFunc(name, sig(tF, goCall(goName), tF), sig(tN, goCall(goName+"_numeric"), tN))
		numericViaFloat(goName, 1, impl)
	}
	defFunc("LOG", sig(tF, goCall("spf_log"), tF, tF).opt(1), sig(tN, goCall("spf_log_numeric"), tN, tN).opt(1))
	logImpl := floatFn("LOG", "spf_log", -1, func(x []float64) (float64, error) {
		if x[0] <= 0 {
			return 0, outOfRange("Argument X to LOG must be positive: %s", spantype.FormatFloat(x[0], 64))
		}
		if len(x) == 1 {
			return math.Log(x[0]), nil
		}
		if x[1] <= 0 || x[1] == 1 {
			return 0, outOfRange("Base for LOG must be positive and not 1: %s", spantype.FormatFloat(x[1], 64))
		}
		return math.Log(x[0]) / math.Log(x[1]), nil
	})
	numericViaFloat("spf_log", -1, logImpl)
	for _, name := range []string{"POW", "POWER"} {
		defFunc(name, sig(tF, goCall("spf_pow"), tF, tF), sig(tN, goCall("spf_pow_numeric"), tN, tN))
	}
	powImpl := floatFn("POW", "spf_pow", 2, func(x []float64) (float64, error) {
		if x[0] == 0 && x[1] < 0 {
			return 0, outOfRange("Division by zero: POW(0, %s)", spantype.FormatFloat(x[1], 64))
		}
		if x[0] < 0 && x[1] != math.Trunc(x[1]) && !math.IsInf(x[1], 0) {
			return 0, outOfRange("Negative base raised to a fractional power in POW")
		}
		return math.Pow(x[0], x[1]), nil
	})
	numericViaFloat("spf_pow", 2, powImpl)
	defFunc("ATAN2", sig(tF, goCall("spf_atan2"), tF, tF))
	floatFn("ATAN2", "spf_atan2", 2, func(x []float64) (float64, error) { return math.Atan2(x[0], x[1]), nil })

	defFunc("IEEE_DIVIDE", sig(tF, goCall("spf_ieee_divide"), tF, tF))
	defStrict("spf_ieee_divide", 2, func(a []driver.Value) (driver.Value, error) {
		x, err := asFloat(a[0])
		if err != nil {
			return nil, err
		}
		y, err := asFloat(a[1])
		return storeFloat(x / y), err
	})
	defFunc("IS_NAN", sig(tB, goCall("spf_is_nan"), tF))
	defStrict("spf_is_nan", 1, func(a []driver.Value) (driver.Value, error) {
		x, err := asFloat(a[0])
		return boolValue(math.IsNaN(x)), err
	})
	defFunc("IS_INF", sig(tB, goCall("spf_is_inf"), tF))
	defStrict("spf_is_inf", 1, func(a []driver.Value) (driver.Value, error) {
		x, err := asFloat(a[0])
		return boolValue(math.IsInf(x, 0)), err
	})

	// SAFE_ arithmetic is the operator's Go function in its NULL-on-error twin.
	for name, op := range map[string]string{"SAFE_ADD": "+", "SAFE_SUBTRACT": "-", "SAFE_MULTIPLY": "*", "SAFE_DIVIDE": "/"} {
		scalars[name] = func(c Call) (Arg, error) {
			if len(c.Args) != 2 {
				return Arg{}, arity(c, "2")
			}
			out, err := arithmetic(op, c.Args[0], c.Args[1])
			if err != nil {
				return Arg{}, err
			}
			return safeOuter(out), nil
		}
	}
	scalars["SAFE_NEGATE"] = func(c Call) (Arg, error) {
		if len(c.Args) != 1 || !isNumOrNull(c.Args[0].Type) {
			return Arg{}, errorf("No matching signature for function SAFE_NEGATE for argument types: %s", typeList(c.Args))
		}
		out, err := Unary("-", c.Args[0])
		if err != nil {
			return Arg{}, err
		}
		return safeOuter(out), nil
	}

	defFunc("MOD",
		sig(tI, goCall("spf_mod_int64"), tI, tI),
		sig(tN, goCall("spf_mod_numeric"), tN, tN))
	defFunc("DIV",
		sig(tI, goCall("spf_intdiv_int64"), tI, tI),
		sig(tN, goCall("spf_intdiv_numeric"), tN, tN))
	intDiv := func(mod bool) func(a []driver.Value) (driver.Value, error) {
		return func(a []driver.Value) (driver.Value, error) {
			x, err := asInt(a[0])
			if err != nil {
				return nil, err
			}
			y, err := asInt(a[1])
			if err != nil {
				return nil, err
			}
			if y == 0 {
				return nil, outOfRange("division by zero: %d / 0", x)
			}
			if mod {
				if y == -1 {
					return int64(0), nil
				}
				return x % y, nil
			}
			if x == math.MinInt64 && y == -1 {
				return nil, outOfRange("int64 overflow: %d / %d", x, y)
			}
			return x / y, nil
		}
	}
	defStrict("spf_mod_int64", 2, intDiv(true))
	defStrict("spf_intdiv_int64", 2, intDiv(false))
	numDiv := func(mod bool) func(a []driver.Value) (driver.Value, error) {
		return func(a []driver.Value) (driver.Value, error) {
			x, err := asNumeric(a[0])
			if err != nil {
				return nil, err
			}
			y, err := asNumeric(a[1])
			if err != nil {
				return nil, err
			}
			if y.Sign() == 0 {
				return nil, outOfRange("division by zero: %s / 0", x.FloatString(0))
			}
			q := ratRound(new(big.Rat).Quo(x, y), 0, true)
			if mod {
				return storeNumeric(new(big.Rat).Sub(x, new(big.Rat).Mul(q, y)))
			}
			return storeNumeric(q)
		}
	}
	defStrict("spf_mod_numeric", 2, numDiv(true))
	defStrict("spf_intdiv_numeric", 2, numDiv(false))
}

// safeOuter turns the outermost Go call of x into its NULL-on-error twin.
func safeOuter(x Arg) Arg {
	if i := strings.IndexByte(x.SQL, '('); i > 0 && strings.HasPrefix(x.SQL, "spf_") {
		x.SQL = x.SQL[:i] + "_safe" + x.SQL[i:]
	}
	return x
}
