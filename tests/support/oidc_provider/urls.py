"""The test provider's pages: Django's login form, the OpenID endpoints under /openid/, and /health."""

from django.contrib.auth import views as auth_views
from django.http import HttpResponse
from django.urls import include, path

urlpatterns = [
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("openid/", include("oidc_provider.urls", namespace="oidc_provider")),
    path("health", lambda request: HttpResponse("ok")),
]
