/*
 * webhooks.h - the admission webhooks (design.md section 7) and validate-crl.
 *
 * Owns what POST /admission/validate and POST /admission/mutate answer:
 * ConfigMaps in the CRL namespace are validated as CustomResourceLimitations
 * (422 with every problem), pods are held to the enabled CRLs (403 with the
 * CRL's name and rule), and the mutating webhook writes the CRL defaults as
 * a base64 RFC 6902 patch. POST /admission/mutate-scheduler-name sets
 * spec.schedulerName to --set-scheduler-name on pods asking for a managed
 * GPU resource (admission/schedulername.h; 404 while that flag is unset).
 * A malformed AdmissionReview gets 400 with
 * {"error": ...}. Also the `validate-crl FILE...` subcommand for CI.
 */
#ifndef GQA_WEBHOOKS_H
#define GQA_WEBHOOKS_H

#include "extender/app.h"
#include "extender/serve/http.h"

void handle_admission_validate(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_admission_mutate(struct app *app, const struct http_request *req, struct http_response *resp);
void handle_admission_mutate_scheduler_name(struct app *app, const struct http_request *req,
                                            struct http_response *resp);

/* `gpu-quota-admission validate-crl [--crl-namespace NS] FILE...`: one line
 * per problem ("FILE: NAME: problem"), exit 1 when any CRL is invalid, 2 when
 * a file cannot be read or parsed, 0 otherwise. */
int validate_crl_main(int argc, char **argv);

#endif
