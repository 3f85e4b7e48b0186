/* api/console/ui/app.js - the console page */
