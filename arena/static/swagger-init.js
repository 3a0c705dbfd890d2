// Starts Swagger UI on /docs/swagger from a file of the site (the Content-Security-Policy allows no
// inline script). The schema comes from the same origin.
window.addEventListener("DOMContentLoaded", function () {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    tryItOutEnabled: false,
  });
});
