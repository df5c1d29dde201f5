/*
 * quantity.h - Kubernetes resource quantities (apimachinery resource.Quantity).
 *
 * Owns the parsing of quantity strings such as "100", "1k", "1Ki", "500m",
 * "1e2", "1.5Gi" with the same grammar and results as apimachinery:
 *
 *   quantity  ::= signedNumber suffix
 *   suffix    ::= binarySI | decimalSI | decimalExponent
 *   binarySI  ::= Ki | Mi | Gi | Ti | Pi | Ei
 *   decimalSI ::= n | u | m | "" | k | M | G | T | P | E
 *   decimalExponent ::= "e" signedNumber | "E" signedNumber
 *
 * Values are returned as exact integers (no floating point anywhere), so
 * "0.1" and "100m" are the same milli-value. Anything that does not fit in
 * int64 is rejected as out of range, never wrapped.
 */
#ifndef GQA_QUANTITY_H
#define GQA_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    QTY_OK = 0,
    QTY_ERR_SYNTAX,   /* not a quantity at all */
    QTY_ERR_RANGE,    /* a quantity, but too large (or too precise) for int64 */
    QTY_ERR_FRACTION, /* a valid quantity that is not a whole number (integer resources) */
    QTY_ERR_NEGATIVE  /* negative where a resource amount is expected */
} qty_status;

/* Parse text[0..len) and store value*1000 (milli-units) in *milli.
 * Values smaller than 1m that are not exact multiples of 1m (e.g. "1n") are
 * rounded up to the next milli-unit, as apimachinery's MilliValue() does;
 * negative values round away from zero ("-1500u" gives -2). *milli is only
 * written on QTY_OK. */
qty_status quantity_parse_milli(const char *text, size_t len, int64_t *milli);

/* Parse a quantity of an integer resource (extended resources such as
 * tencent.com/vcuda-core): the value must be a non-negative whole number.
 * "0.5" and "500m" give QTY_ERR_FRACTION, "1.5k" gives 1500. Negative
 * non-zero values give QTY_ERR_NEGATIVE (checked before fraction/range);
 * "-0" is 0. *value is only written on QTY_OK. */
qty_status quantity_parse_int(const char *text, size_t len, int64_t *value);

/* A short human-readable description of a status ("not a valid quantity", ...). */
const char *quantity_status_text(qty_status status);

#endif
