/* api/console/assets.h - the console's files (api/console/ui/), built into the binary, and
 * how they are served */
#ifndef API_CONSOLE_ASSETS_H
#define API_CONSOLE_ASSETS_H

#include <stddef.h>

#include "shared/http/http.h"

typedef struct console_asset {
    const char *name; /* the file's name under api/console/ui/ */
    const unsigned char *data;
    size_t len;
} console_asset;

/* Generated at build time by api/console/embed.py from the list in api/console/meson.build. */
extern const console_asset console_assets[];
extern const unsigned console_nassets;

/*
 * console_serve - answer GET /admin/ui/@name ("" is index.html) with the file and the
 * console's security headers (docs/console.md "Safety"); 404 when there is no such file.
 */
void console_serve(http_request *r, const char *name);

/* The security headers every console answer carries, as http_reply() takes them. */
extern const char *const console_headers[];

#endif
