/* tests/admin/tschema.h - a strict JSON Schema (2020-12, as OpenAPI 3.1 uses it) checker, a subset
 */
#ifndef TESTS_ADMIN_TSCHEMA_H
#define TESTS_ADMIN_TSCHEMA_H

#include <stddef.h>

#include <jansson.h>

/*
 * The keywords payments.yaml uses, each checked for real: $ref (local "#/..."
 * pointers into the document), type (one or a list), enum, const,
 * properties, required, additionalProperties, propertyNames, items,
 * minItems, maxItems, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
 * minLength, maxLength, pattern (POSIX extended; the document's patterns are
 * in the common subset), format (date-time, uri, uri-reference),
 * contentEncoding (base64), allOf, anyOf, oneOf, not. Annotations
 * (description, title, example(s), default, deprecated, readOnly, writeOnly,
 * $comment, contentMediaType) are skipped. Any other keyword is reported as
 * a violation, so a schema is never passed by ignoring what it says.
 */

/*
 * tschema_validate - check @inst against @schema, whose "$ref"s resolve in
 * @root. Returns the number of violations; the first ones ("/pointer: what")
 * are written to @why (@len bytes, may be 0).
 */
int tschema_validate(const json_t *root, const json_t *schema, const json_t *inst, char *why,
                     size_t len);

/* tschema_resolve - the value at the local reference @ref ("#/a/b~1c") in @root, or NULL. */
const json_t *tschema_resolve(const json_t *root, const char *ref);

/* tschema_deref - @v, or what its "$ref" points at when it is a reference object (repeatedly). */
const json_t *tschema_deref(const json_t *root, const json_t *v);

#endif
