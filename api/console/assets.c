/* api/console/assets.c - the console's files: looked up by name, sent with strict headers */
#include "api/console/assets.h"

#include <string.h>

/* No inline script or style anywhere, nothing from another origin, never framed. */
#define CONSOLE_CSP                                                                                \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "                    \
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

/* (Cache-Control: no-store and X-Content-Type-Options: nosniff come with every answer) */
const char *const console_headers[] = {
    "Content-Security-Policy",
    CONSOLE_CSP,
    "X-Frame-Options",
    "DENY",
    "Referrer-Policy",
    "no-referrer",
    NULL,
};

static const struct {
    const char *ext, *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
};

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');

    for (size_t i = 0; dot != NULL && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

void console_serve(http_request *r, const char *name)
{
    static const char missing[] = "no such file\n";

    if (name[0] == '\0')
        name = "index.html";
    for (unsigned i = 0; i < console_nassets; i++) {
        const console_asset *a = &console_assets[i];
        if (strcmp(a->name, name) == 0) {
            http_reply(r, 200, content_type(name), (const char *)a->data, a->len, console_headers);
            return;
        }
    }
    http_reply(r, 404, "text/plain; charset=utf-8", missing, sizeof missing - 1, console_headers);
}
