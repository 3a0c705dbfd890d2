"""The site over HTTP: middleware, request limits, connection caps, rendering, and the routes."""
