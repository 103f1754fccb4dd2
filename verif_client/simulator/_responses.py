"""The answers the simulator sends, and the canned non-XML pages of ASP.NET and IIS.

Texts follow what ASMX/IIS send (their exact wording varies between .NET
builds, so clients must not match them exactly); stack traces are a few
plausible frames, CRLF-separated, as on Windows.
"""

from __future__ import annotations

from typing import Final

import attrs

from .. import _xml
from .._service import SOAP11_CONTENT_TYPE, SOAP12_CONTENT_TYPE

XML_UTF8: Final = SOAP11_CONTENT_TYPE
SOAP12_UTF8: Final = SOAP12_CONTENT_TYPE
TEXT_UTF8: Final = "text/plain; charset=utf-8"
HTML_UTF8: Final = "text/html; charset=utf-8"

# What every ASMX answer carries besides its own headers.
_COMMON: Final = (
    ("Cache-Control", "private, max-age=0"),
    ("Server", "Microsoft-IIS/10.0"),
    ("X-AspNet-Version", "4.0.30319"),
    ("X-Powered-By", "ASP.NET"),
)


@attrs.frozen(slots=True)
class Response:
    status: int
    content_type: str | None
    body: bytes
    extra_headers: tuple[tuple[str, str], ...] = ()

    @property
    def headers(self) -> list[tuple[str, str]]:
        headers = list(_COMMON)
        if self.content_type is not None:
            headers.append(("Content-Type", self.content_type))
        headers.extend(self.extra_headers)
        if self.status >= 500:
            # IIS closes the connection after every 5xx; a client must cope.
            headers.append(("Connection", "close"))
        return headers


_FRAME: Final = "\r\n   at "

READ_PARAMETERS: Final = (
    "System.Web.Services.Protocols.HttpServerProtocol.ReadParameters()",
    "System.Web.Services.Protocols.WebServiceHandler.CoreProcessRequest()",
)
PARAMETER_READERS: Final = {
    "http-get": "System.Web.Services.Protocols.UrlParameterReader.Read(HttpRequest request)",
    "http-post": "System.Web.Services.Protocols.HtmlFormParameterReader.Read(HttpRequest request)",
}
GET_HANDLER: Final = (
    "System.Web.Services.Protocols.WebServiceHandlerFactory.CoreGetHandler(Type type, "
    "HttpContext context, HttpRequest request, HttpResponse response)",
    "System.Web.Services.Protocols.WebServiceHandlerFactory.GetHandler(HttpContext context, "
    "String verb, String url, String filePath)",
    "System.Web.HttpApplication.MaterializeHandlerExecutionStep."
    "System.Web.HttpApplication.IExecutionStep.Execute()",
)


def asmx_error(first_line: str, *frames: str) -> Response:
    """HTTP 500 ``text/plain``: an exception's first line and a stack trace."""
    text = first_line + "".join(_FRAME + frame for frame in frames)
    return Response(500, TEXT_UTF8, text.encode("utf-8"))


CREDENTIALS_MESSAGE: Final = "Error Message: Invalid API Credentials"


def invalid_credentials() -> Response:
    # Not XML despite the Content-Type: that is what the service sends.
    return Response(200, "text/xml", CREDENTIALS_MESSAGE.encode("ascii"))


def _iis_page(status: int, title: str, heading: str, detail: str) -> Response:
    page = (
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
        '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\r\n'
        '<html xmlns="http://www.w3.org/1999/xhtml">\r\n<head>\r\n'
        '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"/>\r\n'
        f"<title>{title}</title>\r\n</head>\r\n<body>\r\n"
        '<div id="header"><h1>Server Error</h1></div>\r\n<div id="content">\r\n'
        f' <div class="content-container"><fieldset>\r\n  <h2>{heading}</h2>\r\n'
        f"  <h3>{detail}</h3>\r\n </fieldset></div>\r\n</div>\r\n</body>\r\n</html>\r\n"
    )
    return Response(status, "text/html", page.encode("ascii"))


def unauthorized() -> Response:
    return _iis_page(
        401,
        "401 - Unauthorized: Access is denied due to invalid credentials.",
        "401 - Unauthorized: Access is denied due to invalid credentials.",
        "You do not have permission to view this directory or page using the credentials "
        "that you supplied.",
    )


def not_found() -> Response:
    return _iis_page(
        404,
        "404 - File or directory not found.",
        "404 - File or directory not found.",
        "The resource you are looking for might have been removed, had its name changed, "
        "or is temporarily unavailable.",
    )


def service_unavailable() -> Response:
    # HTTP.sys answers this itself when the application pool is down or overloaded.
    page = (
        '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN""http://www.w3.org/TR/html4/strict.dtd">'
        "\r\n<HTML><HEAD><TITLE>Service Unavailable</TITLE>\r\n"
        '<META HTTP-EQUIV="Content-Type" Content="text/html; charset=us-ascii"></HEAD>\r\n'
        "<BODY><h2>Service Unavailable</h2>\r\n<hr><p>HTTP Error 503. The service is "
        "unavailable.</p>\r\n</BODY></HTML>\r\n"
    )
    return Response(503, "text/html; charset=us-ascii", page.encode("ascii"))


def query_too_long() -> Response:
    # ASP.NET refuses it before any handler runs, with its own error page.
    message = (
        "The length of the query string for this request exceeds the configured "
        "maxQueryStringLength value."
    )
    page = (
        "<!DOCTYPE html>\r\n<html>\r\n<head>\r\n<title>Bad Request</title>\r\n</head>\r\n"
        "<body>\r\n<h1>Server Error in '/' Application.</h1>\r\n"
        f"<h2><i>{message}</i></h2>\r\n<p><b>Exception Details:</b> System.Web.HttpException: "
        f"{message}</p>\r\n</body>\r\n</html>\r\n"
    )
    return Response(400, HTML_UTF8, page.encode("ascii"))


def bad_request(too_long: bool) -> Response:
    # HTTP.sys answers a request it cannot read itself, before IIS sees it.
    heading, detail = (
        ("Bad Request - Request Too Long", "The size of the request headers is too long.")
        if too_long
        else ("Bad Request", "The request is badly formed.")
    )
    page = (
        '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN""http://www.w3.org/TR/html4/strict.dtd">'
        "\r\n<HTML><HEAD><TITLE>Bad Request</TITLE>\r\n"
        '<META HTTP-EQUIV="Content-Type" Content="text/html; charset=us-ascii"></HEAD>\r\n'
        f"<BODY><h2>{heading}</h2>\r\n<hr><p>HTTP Error 400. {detail}</p>\r\n</BODY></HTML>\r\n"
    )
    return Response(400, "text/html; charset=us-ascii", page.encode("ascii"))


def help_page(service: str, operations: list[str]) -> Response:
    items = "".join(
        f'<li><a href="?op={_xml.escape(name)}">{_xml.escape(name)}</a></li>' for name in operations
    )
    page = (
        f"<html><head><title>{service} Web Service</title></head><body>"
        f"<h1>{service}</h1><p>The following operations are supported. For a formal "
        f'definition, please review the <a href="?WSDL">Service Description</a>.</p>'
        f"<ul>{items}</ul></body></html>"
    )
    return Response(200, HTML_UTF8, page.encode("utf-8"))
